// Streams and events of the npu devices (guard.cpp, which implements them for c10's
// device guard interface).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

namespace torch_npu {

c10::Stream current_stream(c10::DeviceIndex device);
// Milliseconds between two recorded timing events (their event_id handles).
double event_elapsed_ms(void* start, void* end);

}  // namespace torch_npu
