// out= tensors that overlap themselves, for the cpu kernels that would write past them.
//
// cpu's narrow_copy.out and avg_pool3d.out write their result as if `out` were contiguous:
// given an out tensor with stride 0 (from expand) they write past its storage and corrupt
// the process. CUDA has no narrow_copy.out kernel at all, and its avg_pool3d writes every
// output element through the strides, so aliased elements end up with whichever thread
// wrote last. Neither gives a defined result, so npu refuses such an out tensor with the
// error ATen's elementwise kernels raise for it, before cpu's kernel runs.
#include "torch_npu/csrc/aten/fallback.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/MemoryOverlap.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

void refuse_self_overlapping_out(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  // Both operators have a single out= argument, the last one.
  at::assert_no_internal_overlap(stack->back().toTensor());
  npu_fallback(op, ks, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("narrow_copy.out", torch::CppFunction::makeFromBoxedFunction<&refuse_self_overlapping_out>());
  m.impl("avg_pool3d.out", torch::CppFunction::makeFromBoxedFunction<&refuse_self_overlapping_out>());
}

}  // namespace torch_npu
