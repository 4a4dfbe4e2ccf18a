// Device functions of the public C++ API (NPUFunctions.h, NPUException.h): device count
// and selection, host synchronisation, the sync debug mode and the last error message.
#include "torch_npu/csrc/core/npu/NPUFunctions.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <string>

#include "torch_npu/csrc/observe/sync_debug.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/core/npu/NPUException.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace c10_npu {
namespace {
// The message of this thread's last failed ACL-style call (one returning an aclError).
thread_local std::string tls_last_error;
void set_last_error(const std::string& message) { tls_last_error = message; }
}  // namespace

c10::DeviceIndex device_count() { return torch_npu::device_count(); }

c10::DeviceIndex device_count_ensure_non_zero() {
  c10::DeviceIndex count = torch_npu::device_count();
  TORCH_CHECK(count > 0, "no npu device: TORCH_NPU_DEVICE_COUNT is 0");
  return count;
}

aclError GetDevice(int32_t* device) {
  if (device == nullptr) {
    set_last_error("GetDevice: the output pointer is null");
    return ACL_ERROR_INVALID_PARAM;
  }
  *device = torch_npu::current_device();
  return ACL_SUCCESS;
}

aclError SetDevice(c10::DeviceIndex device) {
  try {
    torch_npu::set_current_device(device);
    torch_npu::lazy_init();
  } catch (const c10::Error& e) {
    set_last_error(e.what_without_backtrace());
    return ACL_ERROR_INVALID_PARAM;
  }
  return ACL_SUCCESS;
}

c10::DeviceIndex current_device() { return torch_npu::current_device(); }

void set_device(c10::DeviceIndex device) { torch_npu::set_current_device(device); }

void device_synchronize(c10::DeviceIndex device_index) {
  c10::DeviceIndex idx = device_index < 0 ? torch_npu::current_device() : device_index;
  torch_npu::check_device_index(idx, "device_synchronize");
  c10::impl::VirtualGuardImpl(torch_npu::kNpu).synchronizeDevice(idx);
}

void stream_synchronize(aclrtStream stream) { streamFromHandle(stream).synchronize(); }

void WarningState::set_sync_debug_mode(SyncDebugMode level) {
  torch_npu::set_sync_debug_mode(static_cast<int>(level));
}

SyncDebugMode WarningState::get_sync_debug_mode() {
  return static_cast<SyncDebugMode>(torch_npu::sync_debug_mode());
}

WarningState& warning_state() {
  static WarningState state;
  return state;
}

void warn_or_error_on_sync() { torch_npu::note_host_sync("a synchronization requested by a C++ extension"); }

char* c10_npu_get_error_message() { return tls_last_error.data(); }

}  // namespace c10_npu
