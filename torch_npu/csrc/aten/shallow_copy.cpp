// Whether `param.data = tensor` may swap an npu tensor's contents into an existing tensor.
//
// Module._apply (behind .to("npu"), .npu(), .cpu(), .half()) asks
// `torch._has_compatible_shallow_copy_type(param, converted)` and, when the answer is yes,
// updates the existing Parameter in place (`param.data = converted`), so a Parameter shared
// by two modules (tied embeddings) stays one Parameter. TensorImpl's built-in answer lists
// only in-tree dense backends, so for cpu <-> npu it is "no" and every module gets a fresh
// Parameter: tied weights come apart. TensorImpl.h names this operator as the hook through
// which a PrivateUse1 backend gives its own answer: npu tensors are plain dense tensors,
// interchangeable with any other dense tensor exactly as cpu and cuda ones are.

#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

// TensorImpl's rule for dense tensors, with npu among the dense backends.
bool is_dense(c10::DispatchKeySet ks) {
  using c10::BackendComponent;
  constexpr auto dense_backends = c10::DispatchKeySet(
      {BackendComponent::CPUBit, BackendComponent::CUDABit, BackendComponent::MPSBit, BackendComponent::HIPBit,
       BackendComponent::XPUBit, BackendComponent::HPUBit, BackendComponent::MTIABit,
       BackendComponent::PrivateUse1Bit});
  return ks.has_any(c10::DispatchKeySet(c10::DispatchKey::Dense)) && ks.has_any(dense_backends);
}

bool npu_has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (is_dense(self.key_set()) && is_dense(from.key_set()));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(npu_has_compatible_shallow_copy_type));
}

}  // namespace torch_npu
