// The npu convolution compiled code calls: the CPU kernel's output in the layout it writes
// (`npu::_convolution_host_layout`, and `torch.npu._convolution_host_layout` without the
// dispatcher).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <optional>

namespace torch_npu {

at::Tensor npu_convolution_host_layout(const at::Tensor& input, const at::Tensor& weight,
                                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                       at::IntArrayRef output_padding, int64_t groups);

}  // namespace torch_npu
