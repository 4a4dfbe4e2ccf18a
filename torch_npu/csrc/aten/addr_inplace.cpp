// Tensor.addr_ on npu, refusing what cpu and CUDA refuse.
//
// aten::addr_ has only a composite kernel: it calls addr.out with `self` as both input and
// output, and addr.out tells the in-place call apart by comparing the C++ references of the
// two (an in-place call must not broadcast `self`, so a 0-dim or 1-dim self is refused with
// "2D tensor expected"). Through the boxed fallback the two arguments become two tensor
// objects, the comparison fails, and npu broadcast where cpu and CUDA raise. Running the
// composite itself on the cpu aliases of the npu tensors keeps the references as ATen
// expects.
#include "torch_npu/csrc/aten/fallback.h"

#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_npu {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("addr_", torch::CppFunction::makeFromBoxedFunction<&npu_fallback>());
}

}  // namespace torch_npu
