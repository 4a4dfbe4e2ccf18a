// torch.nansum (and so torch.nanmean, its composite) of complex npu tensors, as CUDA
// defines it.
//
// cpu's nansum refuses complex inputs by an explicit check that only cpu makes; CUDA's
// kernel sums complex values, counting an element whose real or imaginary part is NaN as
// zero. The npu kernel does exactly that with cpu's kernels: it zeroes the NaN elements
// and sums with aten::sum (complex32 through the widening table, as sum itself). Every
// other input runs cpu's nansum kernel through the fallback.
#include "torch_npu/csrc/aten/fallback.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <vector>

namespace torch_npu {
namespace {

// `self` with its NaN elements (NaN real or imaginary part) replaced by zero.
at::Tensor zero_nans(const at::Tensor& self) { return self.masked_fill(self.isnan(), 0); }

// aten::nansum and aten::nansum.out.
void nansum_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t num_args = op.schema().arguments().size();
  const size_t begin = stack->size() - num_args;
  const at::Tensor self = (*stack)[begin].toTensor();
  if (!self.is_complex()) {
    npu_fallback(op, ks, stack);
    return;
  }
  const auto dim = (*stack)[begin + 1].toOptional<std::vector<int64_t>>();
  const bool keepdim = (*stack)[begin + 2].toBool();
  const auto dtype = (*stack)[begin + 3].toOptional<at::ScalarType>();
  at::OptionalIntArrayRef dims;
  if (dim.has_value()) dims = *dim;
  const at::Tensor summed = zero_nans(self);
  at::Tensor result;
  if (num_args == 5) {
    result = (*stack)[begin + 4].toTensor();
    at::sum_out(result, summed, dims, keepdim, dtype);
  } else {
    result = at::sum(summed, dims, keepdim, dtype);
  }
  torch::jit::drop(*stack, num_args);
  stack->push_back(result);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nansum", torch::CppFunction::makeFromBoxedFunction<&nansum_kernel>());
  m.impl("nansum.out", torch::CppFunction::makeFromBoxedFunction<&nansum_kernel>());
}

}  // namespace torch_npu
