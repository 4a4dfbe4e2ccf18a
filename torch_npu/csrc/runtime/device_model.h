// The card the devices pretend to be (TORCH_NPU_DEVICE_MODEL; default: the generic
// simulated NPU), as device_model.cpp describes it. A bad name raises a clear error,
// every time it is asked.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/DeviceCapability.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch_npu {

struct DeviceProfile {
  std::string name;
  int64_t total_memory;
  int64_t cube_core_num;
  int64_t vector_core_num;
  int64_t l2_cache_size;
  int major;
  int minor;
  bool bf16;
  std::string arch;
};
const std::vector<DeviceProfile>& device_profiles();
const DeviceProfile& device_profile();
c10::DeviceCapability device_capability(c10::DeviceIndex device);

}  // namespace torch_npu
