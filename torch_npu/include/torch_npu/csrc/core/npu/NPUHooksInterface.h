// The npu's PrivateUse1 hooks as C++ extensions name them. The hooks PyTorch calls are
// the runtime's; this interface answers the same questions from the same state.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace c10_npu {

struct TORCH_NPU_API NPUHooksInterface : public at::PrivateUse1HooksInterface {
  ~NPUHooksInterface() override = default;
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override;
  // The device's default generator: the one torch.npu.manual_seed seeds.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override;
};

// The process's instance.
TORCH_NPU_API NPUHooksInterface& get_npu_hooks();

}  // namespace c10_npu
