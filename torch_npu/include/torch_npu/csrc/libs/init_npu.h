// Start-up and shut-down of the npu for C++ programs and extensions, and the few
// torch::npu / c10::npu free functions that mirror torch::cuda's.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace torch_npu {

// Initialises the runtime and makes `device_index` the current device.
TORCH_NPU_API void init_npu(const c10::DeviceIndex device_index = 0);
// device_str: "npu" or "npu:<index>".
TORCH_NPU_API void init_npu(const std::string& device_str);
TORCH_NPU_API void init_npu(const at::Device& device);

// Waits for all devices' work and returns the cached device memory.
TORCH_NPU_API void finalize_npu();

}  // namespace torch_npu

namespace torch::npu {

// Waits for all work on the device (-1: the current device).
TORCH_NPU_API void synchronize(int64_t device_index = -1);

}  // namespace torch::npu

namespace c10::npu {

TORCH_NPU_API c10::DeviceIndex current_device();

}  // namespace c10::npu
