// NPU storage formats in the public C++ API (NPUFormat.h). Casts and format-aware
// allocation go through the npu operators torch_npu defines (torch.ops.npu.*), so C++
// and Python callers get the same checks, autograd and tracing behaviour.
#include "torch_npu/csrc/core/npu/NPUFormat.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include "torch_npu/csrc/aten/fallback.h"
#include "torch_npu/csrc/runtime/device.h"

namespace at_npu::native {
namespace {

c10::OperatorHandle npu_operator(const char* name, const char* overload = "") {
  auto op = c10::Dispatcher::singleton().findSchema({name, overload});
  TORCH_CHECK(op.has_value(), name, " is not defined: import torch_npu in this process before calling its C++ API");
  return *op;
}

}  // namespace

int64_t get_npu_format(const at::Tensor& self) {
  TORCH_CHECK(self.device().type() == torch_npu::kNpu, "get_npu_format expects an npu tensor, got one on ",
              self.device());
  return torch_npu::npu_format_of(self);
}

std::vector<int64_t> get_npu_storage_sizes(const at::Tensor& self) {
  TORCH_CHECK(self.device().type() == torch_npu::kNpu, "get_npu_storage_sizes expects an npu tensor, got one on ",
              self.device());
  // Every format is stored as the tensor's plain strided memory.
  return self.sizes().vec();
}

at::Tensor npu_format_cast(const at::Tensor& self, int64_t acl_format) {
  if (self.device().type() == torch_npu::kNpu && get_npu_format(self) == acl_format) return self;
  static auto op = npu_operator("npu::npu_format_cast").typed<at::Tensor(const at::Tensor&, int64_t)>();
  return op.call(self, acl_format);
}

at::Tensor empty_with_format(c10::IntArrayRef sizes, const c10::TensorOptions& options, int64_t format,
                             bool keep_format) {
  static auto op = npu_operator("npu::unsafe_empty_with_format")
                       .typed<at::Tensor(c10::SymIntArrayRef, std::optional<at::ScalarType>,
                                         std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>,
                                         int64_t, bool)>();
  return op.call(c10::fromIntArrayRefSlow(sizes), c10::optTypeMetaToScalarType(options.dtype_opt()),
                 options.layout_opt(), options.device_opt(), options.pinned_memory_opt(), format, keep_format);
}

at::Tensor empty_with_swapped_memory(c10::IntArrayRef size, c10::optional<at::ScalarType> dtype_opt,
                                     c10::optional<c10::Device> device_opt) {
  static auto op = npu_operator("npu::empty_with_swapped_memory")
                       .typed<at::Tensor(c10::SymIntArrayRef, std::optional<at::ScalarType>,
                                         std::optional<at::Device>)>();
  return op.call(c10::fromIntArrayRefSlow(size), dtype_opt, device_opt);
}

}  // namespace at_npu::native
