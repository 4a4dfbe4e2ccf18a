// Operator functions of the npu's operator plugin that C++ extensions call directly.
#pragma once

#include <ATen/Tensor.h>
#include <c10/util/Optional.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace at_npu::native {

// A dropout keep-mask: one bit per element of `size` (1 = keep, with probability 1 - p),
// packed little-endian into uint8, padded to a multiple of 128 elements. The same
// (seed, offset) gives the same mask.
TORCH_NPU_API at::Tensor npu_dropout_gen_mask(const at::Tensor& self, at::IntArrayRef size, double p, int64_t seed,
                                              int64_t offset, c10::optional<bool> parallel, c10::optional<bool> sync);

}  // namespace at_npu::native
