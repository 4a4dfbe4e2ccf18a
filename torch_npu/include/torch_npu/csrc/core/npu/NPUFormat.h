// NPU storage formats for C++ extensions (torch_npu.npu_format_cast / get_npu_format in
// Python). The simulated device stores every format as plain strided memory: a format
// is a recorded property of the tensor, carried by copies and serialization.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <vector>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace at_npu::native {

TORCH_NPU_API int64_t get_npu_format(const at::Tensor& self);
TORCH_NPU_API std::vector<int64_t> get_npu_storage_sizes(const at::Tensor& self);
TORCH_NPU_API at::Tensor npu_format_cast(const at::Tensor& self, int64_t acl_format);
TORCH_NPU_API at::Tensor empty_with_format(c10::IntArrayRef sizes, const c10::TensorOptions& options, int64_t format,
                                           bool keep_format = false);
TORCH_NPU_API at::Tensor empty_with_swapped_memory(c10::IntArrayRef size, c10::optional<at::ScalarType> dtype_opt,
                                                   c10::optional<c10::Device> device_opt);

}  // namespace at_npu::native
