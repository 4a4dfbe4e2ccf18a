// Device functions of the npu for C++ extensions, the counterparts of
// c10/cuda/CUDAFunctions.h: device count and selection, host synchronisation and the sync
// debug mode that torch.npu.set_sync_debug_mode sets from Python.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

#include "third_party/acl/inc/acl/acl_base.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace c10_npu {

TORCH_NPU_API c10::DeviceIndex device_count();
TORCH_NPU_API c10::DeviceIndex device_count_ensure_non_zero();

// ACL-style: return ACL_SUCCESS or an error code (the message: c10_npu_get_error_message()).
TORCH_NPU_API aclError GetDevice(int32_t* device);
TORCH_NPU_API aclError SetDevice(c10::DeviceIndex device);

// Raising variants.
TORCH_NPU_API c10::DeviceIndex current_device();
TORCH_NPU_API void set_device(c10::DeviceIndex device);

// Waits for all work on the device (-1: the current device).
TORCH_NPU_API void device_synchronize(c10::DeviceIndex device_index = -1);
// Waits for the work of the stream `stream` is the handle of.
TORCH_NPU_API void stream_synchronize(aclrtStream stream);

enum class SyncDebugMode { L_DISABLED = 0, L_WARN, L_ERROR };

// The process-wide sync debug mode (shared with torch.npu.set_sync_debug_mode).
class TORCH_NPU_API WarningState {
 public:
  void set_sync_debug_mode(SyncDebugMode level);
  SyncDebugMode get_sync_debug_mode();
};

TORCH_NPU_API WarningState& warning_state();

// Call at a host synchronisation point: warns or raises as the sync debug mode says.
TORCH_NPU_API void warn_or_error_on_sync();

}  // namespace c10_npu
