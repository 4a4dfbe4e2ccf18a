// Running an operator with cpu's kernel, in a wider dtype where CUDA has a kernel for the
// arguments' dtype and cpu has none (cuda_dtype_widening.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torch_npu {

// Redispatches `op` to `cpu_keys` on `stack` (whose tensors are cpu aliases of npu memory):
// as is, or, for an (op, dtype) of the widening table, with the narrow arguments converted
// to the computation dtype and the results rounded back to the dtype CUDA returns.
void redispatch_to_cpu_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet cpu_keys, torch::jit::Stack* stack);

}  // namespace torch_npu
