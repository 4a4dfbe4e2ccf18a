// Conjugate and negative views of npu tensors (x.conj(), x.H, torch.fft.ifft of a real
// input, the lazy negation of autograd formulas).
//
// ATen keeps such views lazy: the Conjugate/Negative dispatch keys resolve them before a
// kernel runs by cloning the input. For a device that copies through aten::_copy_from,
// that clone is itself a _copy_from of the lazy view, so the resolution recurses until
// the stack overflows (the SIGSEGV of conj/ifft/svd on complex npu tensors). The npu
// copy kernel resolves both bits itself: its CPU aliases carry them and the CPU copy
// materialises them, exactly as a CUDA copy kernel does. So the two copy entry points let
// both keys through to the npu kernel instead of resolving first.
#include <torch/library.h>

namespace torch_npu {

TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace torch_npu
