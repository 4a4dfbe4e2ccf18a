// Sparse COO tensors on npu (x.to_sparse(), torch.sparse_coo_tensor(..., device="npu"),
// coalesce, to_dense, torch.sparse.mm, indices()/values(), ...), as on CUDA.
//
// An npu sparse tensor is a SparseTensorImpl with the SparsePrivateUse1 key whose indices
// and values are npu tensors. Sparse operators reach the same boxed fallback as dense ones:
// each sparse argument crosses as a SparseCPU tensor over CPU aliases of its indices and
// values (no copy), the SparseCPU kernel runs, and sparse results come back as npu sparse
// tensors over the device memory the kernel wrote.
#include "torch_npu/csrc/aten/deferred_registrations.h"
#include "torch_npu/csrc/aten/fallback.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/SparseTensorImpl.h>
#include <torch/library.h>

#include <mutex>

namespace torch_npu {
namespace {

at::SparseTensorImpl* sparse_impl(const at::Tensor& t) {
  return static_cast<at::SparseTensorImpl*>(t.unsafeGetTensorImpl());
}

void refuse_compressed_layout(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().name(), ": npu supports strided and sparse COO tensors; the "
                              "compressed sparse layouts (CSR, CSC, BSR, BSC) are not supported on npu. Use "
                              "to_sparse() for a COO tensor, or keep compressed tensors on cpu.");
}

}  // namespace

at::Tensor make_sparse_over(c10::DispatchKey key, const at::Tensor& like, const at::Tensor& indices,
                            const at::Tensor& values) {
  auto* like_impl = sparse_impl(like);
  auto t = at::detail::make_tensor<at::SparseTensorImpl>(c10::DispatchKeySet(key), like.dtype());
  auto* impl = sparse_impl(t);
  impl->raw_resize_(like_impl->sparse_dim(), like_impl->dense_dim(), like.sizes());
  impl->set_indices_and_values_unsafe(indices, values);
  impl->set_coalesced(like_impl->coalesced());
  return t;
}

void assign_sparse(const at::Tensor& npu, const at::Tensor& cpu, const at::Tensor& indices,
                   const at::Tensor& values) {
  auto* src = sparse_impl(cpu);
  auto* dst = sparse_impl(npu);
  dst->raw_resize_(src->sparse_dim(), src->dense_dim(), cpu.sizes());
  dst->set_indices_and_values_unsafe(indices, values);
  dst->set_coalesced(src->coalesced());
}

// Registered at the device's initialisation (deferred_registrations.h). Operators with a
// SparseCPU kernel and a composite one: for SparsePrivateUse1 the dispatcher would pick the
// composite (dense code, or a "expected sparse layout" error, as for indices() and
// is_coalesced()), so they are sent to the fallback explicitly, chosen from every aten
// operator.
void register_sparse_fallbacks() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Never destroyed, as the dense fallback's libraries (kernels.cpp).
    auto* sparse = new torch::Library(torch::Library::IMPL, "_", c10::DispatchKey::SparsePrivateUse1, __FILE__, __LINE__);
    sparse->fallback(torch::CppFunction::makeFromBoxedFunction<&npu_fallback>());
    auto* compressed =
        new torch::Library(torch::Library::IMPL, "_", c10::DispatchKey::SparseCsrPrivateUse1, __FILE__, __LINE__);
    compressed->fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_compressed_layout>());
    auto* routed = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::SparsePrivateUse1, __FILE__, __LINE__);
    route_composites_with_cpu_kernels_to_fallback(*routed, c10::DispatchKey::SparseCPU,
                                                  c10::DispatchKey::SparsePrivateUse1);
  });
}

}  // namespace torch_npu
