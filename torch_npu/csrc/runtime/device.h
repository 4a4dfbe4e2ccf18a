// The npu devices: how many there are, which one each thread uses, their one-time
// initialisation and fork safety (device.cpp).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace torch_npu {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

c10::DeviceIndex device_count();                  // from TORCH_NPU_DEVICE_COUNT, default 2
c10::DeviceIndex current_device();                // per thread
void set_current_device(c10::DeviceIndex index);  // validates
void check_device_index(int64_t index, const char* what);
c10::DeviceIndex resolve_device_index(int64_t index);  // -1 -> current
void lazy_init();
bool is_initialized();

// True in a process forked from one that had initialised npu.
bool in_bad_fork();
// Raises CUDA's error for a forked child, naming the spawn start method, if in one.
void check_not_in_bad_fork();

}  // namespace torch_npu
