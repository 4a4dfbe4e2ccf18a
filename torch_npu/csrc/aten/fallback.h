// Internals of the operator fallback shared by the files that extend it: which foreign
// tensors (cpu, or another npu device) an npu operator accepts, how sparse COO and zero
// tensors cross between npu and the CPU kernels, and the fallback entry itself.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>
#include <torch/library.h>

namespace torch_npu {

// Runs `op` with its CPU kernel on the bytes of its npu arguments (kernels.cpp).
void npu_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

// Sends to the fallback every aten operator that has a `cpu_key` kernel and also a
// composite one, and no `device_key` kernel yet: for `device_key` the dispatcher would
// otherwise pick the composite, while npu promises the CPU kernel's results (kernels.cpp).
void route_composites_with_cpu_kernels_to_fallback(torch::Library& m, c10::DispatchKey cpu_key,
                                                   c10::DispatchKey device_key);

// Raises the error a CUDA kernel raises when `t` (a cpu tensor, or an npu tensor of
// another device) is argument `arg_index` of `op` whose other tensors live on npu
// `device`; returns when CUDA's kernel accepts it (cpu_arguments.cpp).
void check_foreign_argument(const c10::OperatorHandle& op, size_t arg_index, const at::Tensor& t,
                            c10::DeviceIndex device);

// A sparse COO tensor of dispatch key `key` (SparseCPU or SparsePrivateUse1) with the
// sparse/dense dims, sizes and coalesced flag of `like`, over `indices` and `values`
// (sparse.cpp).
at::Tensor make_sparse_over(c10::DispatchKey key, const at::Tensor& like, const at::Tensor& indices,
                            const at::Tensor& values);
// Gives the npu sparse tensor `npu` the state a CPU kernel left in its CPU alias
// `cpu`, whose indices and values were already brought back as npu tensors.
void assign_sparse(const at::Tensor& npu, const at::Tensor& cpu, const at::Tensor& indices,
                   const at::Tensor& values);

// An npu ZeroTensor (no memory, reads as zeros) of the geometry of `like` (zero_tensors.cpp).
at::Tensor make_npu_zero_tensor(c10::IntArrayRef size, c10::ScalarType dtype, c10::DeviceIndex device);

// Backend metadata (backend_meta.cpp): a copy into an npu tensor that has none takes
// the source's; the recorded NPU storage format (2 = ND, the default).
void copy_backend_meta_if_absent(const at::Tensor& src, const at::Tensor& dst);
int64_t npu_format_of(const at::Tensor& t);
void set_npu_format(const at::Tensor& t, int64_t format);

}  // namespace torch_npu
