// Start-up and shut-down of the public C++ API (libs/init_npu.h), and the torch::npu /
// c10::npu free functions.
#include "torch_npu/csrc/libs/init_npu.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include "torch_npu/csrc/runtime/allocator.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/core/npu/NPUFunctions.h"

namespace torch_npu {

void init_npu(const c10::DeviceIndex device_index) {
  check_device_index(device_index, "init_npu");
  set_current_device(device_index);
  lazy_init();
}

void init_npu(const std::string& device_str) {
  c10::Device device(device_str);
  TORCH_CHECK(device.type() == kNpu, "init_npu expects an npu device such as \"npu:0\", got \"", device_str, "\"");
  init_npu(device);
}

void init_npu(const at::Device& device) {
  TORCH_CHECK(device.type() == kNpu, "init_npu expects an npu device, got ", device);
  init_npu(device.has_index() ? device.index() : static_cast<c10::DeviceIndex>(0));
}

void finalize_npu() {
  if (!is_initialized()) return;
  for (c10::DeviceIndex i = 0; i < device_count(); ++i) c10_npu::device_synchronize(i);
  empty_cache();
}

}  // namespace torch_npu

namespace torch::npu {

void synchronize(int64_t device_index) {
  TORCH_CHECK(device_index >= -1 && device_index <= std::numeric_limits<c10::DeviceIndex>::max(),
              "torch::npu::synchronize: invalid device index ", device_index);
  c10_npu::device_synchronize(static_cast<c10::DeviceIndex>(device_index));
}

}  // namespace torch::npu

namespace c10::npu {

c10::DeviceIndex current_device() { return torch_npu::current_device(); }

}  // namespace c10::npu
