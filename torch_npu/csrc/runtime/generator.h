// Random number generators of the npu devices (generator.cpp).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace torch_npu {

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);
// The CPU generator whose state backs an npu generator.
at::Generator backing_cpu_generator(const at::Generator& npu_gen);

}  // namespace torch_npu
