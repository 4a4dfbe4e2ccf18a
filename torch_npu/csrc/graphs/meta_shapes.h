// The output geometry of an operator an NPU graph capture records, found without running
// the operator on its arguments (meta_shapes.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <vector>

namespace torch_npu {

// The outputs of `op` on `cpu_args` as meta tensors, one stack entry per return. Raises
// what the meta kernel raises: an output shape that depends on the values, or no kernel.
torch::jit::Stack meta_outputs(const c10::OperatorHandle& op, const std::vector<c10::IValue>& cpu_args);

// True when the dispatcher has a kernel it runs for `op` on meta tensors: a Meta kernel
// (structured kernels' meta functions, PyTorch's Python meta registrations, a library's
// register_fake) or a composite kernel, which serves every backend without its own.
bool has_meta_kernel(const c10::OperatorHandle& op);

}  // namespace torch_npu
