// Efficient zero tensors on npu.
//
// Autograd formulas return `_efficientzerotensor` for gradients known to be zero (the
// backward of torch.sgn on a real input, of masked or integer-valued paths, ...): a tensor
// without memory whose ZeroTensor dispatch key makes every op read it as zeros. The CPU
// kernel builds a cpu one, whose null memory cannot be handed over to the device (the
// SIGSEGV of sgn's backward); like CUDA, npu builds its own, with the npu key.
#include "torch_npu/csrc/aten/fallback.h"
#include "torch_npu/csrc/runtime/device.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>
#include <torch/library.h>

namespace torch_npu {

at::Tensor make_npu_zero_tensor(c10::IntArrayRef size, c10::ScalarType dtype, c10::DeviceIndex device) {
  at::native::ZeroTensorAllocator allocator(c10::Device(kNpu, device));
  auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocator, keys, dtype, std::nullopt);
}

namespace {

at::Tensor npu_efficientzerotensor(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                   std::optional<at::Layout> layout, std::optional<at::Device> device,
                                   std::optional<bool> pin_memory) {
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided,
              "_efficientzerotensor: npu zero tensors are strided, got layout ", layout.value());
  TORCH_CHECK(!pin_memory.value_or(false), "_efficientzerotensor: npu tensors cannot be pinned");
  c10::DeviceIndex idx = device.has_value() && device->has_index() ? device->index() : current_device();
  check_device_index(idx, "_efficientzerotensor");
  return make_npu_zero_tensor(size, c10::dtype_or_default(dtype), idx);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_efficientzerotensor", TORCH_FN(npu_efficientzerotensor));
}

}  // namespace torch_npu
