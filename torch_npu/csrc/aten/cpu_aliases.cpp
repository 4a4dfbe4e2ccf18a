// CPU tensors over the bytes of npu tensors, the way the CPU kernels see npu memory.
//
// ATen decides whether two tensors may alias by comparing their storages
// (`Storage::is_alias_of`, used by `at::get_overlap_status`) and whether they are one
// tensor by comparing TensorImpls (`is_same`). The CPU kernel that runs an npu operator
// must therefore see views of one npu storage as views of one CPU storage, and one npu
// tensor as one CPU tensor: otherwise `u[1:].add_(u[:-1])` looks like two unrelated
// tensors and the CPU kernel's overlap checks let it through (order-dependent results
// where cpu and CUDA raise).
#include "torch_npu/csrc/aten/cpu_aliases.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

namespace torch_npu {

namespace {

c10::Storage cpu_storage_over(const c10::Storage& storage) {
  void* data = storage.unsafeGetStorageImpl()->data_ptr().get();
  // Non-owning, but resizable through the (redirecting) CPU allocator so that out=
  // kernels that resize their output allocate the new memory on the device.
  return c10::Storage(c10::Storage::use_byte_size_t(), storage.nbytes(), c10::DataPtr(data, c10::Device(c10::kCPU)),
                      c10::GetCPUAllocator(), /*resizable=*/true);
}

at::Tensor cpu_tensor_over(c10::Storage cpu_storage, const at::Tensor& t) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(cpu_storage),
                                                   c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) impl->_set_conj(true);
  if (t.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

}  // namespace

at::Tensor cpu_alias(const at::Tensor& t) { return cpu_tensor_over(cpu_storage_over(t.storage()), t); }

at::Tensor CpuAliasSet::alias(const at::Tensor& t) {
  for (const auto& [npu, cpu] : tensors_) {
    if (npu == t.unsafeGetTensorImpl()) return cpu;
  }
  c10::StorageImpl* npu_storage = t.storage().unsafeGetStorageImpl();
  const c10::Storage* cpu_storage = nullptr;
  for (const auto& [npu, cpu] : storages_) {
    if (npu == npu_storage) cpu_storage = &cpu;
  }
  if (cpu_storage == nullptr) {
    storages_.emplace_back(npu_storage, cpu_storage_over(t.storage()));
    cpu_storage = &storages_.back().second;
  }
  at::Tensor cpu = cpu_tensor_over(*cpu_storage, t);
  tensors_.emplace_back(t.unsafeGetTensorImpl(), cpu);
  return cpu;
}

bool CpuAliasSet::is_new(const at::Tensor& t) const {
  for (const auto& [npu, cpu] : tensors_) {
    if (npu == t.unsafeGetTensorImpl()) return false;
  }
  return true;
}

}  // namespace torch_npu
