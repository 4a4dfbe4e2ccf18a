// CPU implementations run on the npu tensors themselves, without CPU aliases.
//
// npu memory is host memory, so a CPU implementation that only reads data pointers, takes
// its scratch and outputs from the operator's options (npu, hence the device's caching
// allocator) and runs its kernels through DispatchStubs called for kCPU computes on npu
// tensors exactly what it computes on cpu. For such implementations an npu kernel can
// skip the CPU aliases and the adoption of the CPU results (fast_path.h's FastCall): it
// admits the call by the same rules, then runs the structured kernel's meta and impl (or
// the implementation function) on the npu tensors. Implementations that choose their
// kernel by device (`is_cpu()`, oneDNN tensors that refuse non-CPU memory) stay on the
// CPU aliases: each caller says which calls qualify.
#pragma once

#include "torch_npu/csrc/aten/fast_path.h"
#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/runtime/allocator.h"

#include <ATen/EmptyTensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorMeta.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>

#include <array>
#include <optional>
#include <type_traits>

namespace torch_npu {

namespace direct_call_detail {

inline bool same_npu_device(const at::Tensor& t, c10::DeviceIndex& device) {
  if (!t.defined()) return true;
  if (!is_plain_npu(t)) return false;
  if (device < 0) device = t.device().index();
  return t.device().index() == device;
}
inline bool same_npu_device(const std::optional<at::Tensor>& t, c10::DeviceIndex& device) {
  return !t.has_value() || same_npu_device(*t, device);
}
// Arguments that are not tensors take no part in the admission.
template <typename T>
bool same_npu_device(const T&, c10::DeviceIndex&) {
  return true;
}

}  // namespace direct_call_detail

// The device an npu kernel may run the CPU implementation on with the tensors of `args` as
// they are, or -1: FastCall::admit's rules (no observer, not a bad fork, plain npu tensors
// of one device, no capture underway on this thread's stream).
template <typename... Args>
c10::DeviceIndex direct_call_device(const Args&... args) {
  if (!fast_paths_allowed()) return -1;
  c10::DeviceIndex device = -1;
  if (!(direct_call_detail::same_npu_device(args, device) && ...)) return -1;
  if (device < 0) return -1;
  // Last: a capture may start on another thread at any time, but only work queued on a
  // capturing stream is recorded, and that is this thread's current stream.
  if (active_capture() != nullptr) return -1;
  return device;
}

// A new npu tensor as the generated CPU wrappers' create_out makes a CPU one, on the
// current device.
inline at::Tensor empty_npu_output(c10::IntArrayRef sizes, c10::IntArrayRef strides, const c10::TensorOptions& options) {
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return strides.empty() ? at::detail::empty_generic(sizes, npu_allocator(), keys, options.dtype().toScalarType(),
                                                     options.memory_format_opt())
                         : at::detail::empty_strided_generic(sizes, strides, npu_allocator(), keys,
                                                             options.dtype().toScalarType());
}

// The functional form of structured kernel `Structured` with `N` outputs: each output a
// new npu tensor of the geometry the meta function asks for. A TensorIterator kernel's
// iterator then takes the output as its operand (as in the generated CPU wrapper).
template <typename Structured, size_t N = 1>
struct NpuStructuredFunctional final : Structured {
  static constexpr bool kIterator = std::is_base_of_v<at::TensorIteratorBase, Structured>;
  void set_output_strided(int64_t output_idx, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    outputs[output_idx] = empty_npu_output(sizes, strides, options);
    if constexpr (kIterator) Structured::set_output_strided(output_idx, sizes, strides, options);
  }
  void set_output_raw_strided(int64_t output_idx, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    outputs[output_idx] = empty_npu_output(sizes, strides, options);
    if constexpr (kIterator) Structured::set_output_raw_strided(output_idx, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t output_idx) override { return outputs[output_idx]; }
  std::array<at::Tensor, N> outputs;
};

// The out= form of a one-output structured kernel that is not a TensorIterator kernel, as
// the generated CPU out= wrapper: the dtype and device checks, the resize (and restride) of
// `out`, and a proxy output where the kernel needs strides `out` lacks, copied back by
// finish().
template <typename Structured>
struct NpuStructuredOut final : Structured {
  static_assert(!std::is_base_of_v<at::TensorIteratorBase, Structured>, "TensorIterator kernels: see the elementwise ops");
  explicit NpuStructuredOut(const at::Tensor& out) : out(out) {}
  void set_output_strided(int64_t /*output_idx*/, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    resize_out(sizes, strides, options);
    if (out.strides() != strides) proxy = at::detail::empty_strided_generic(
                                      sizes, strides, npu_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                      options.dtype().toScalarType());
  }
  void set_output_raw_strided(int64_t /*output_idx*/, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    resize_out(sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t /*output_idx*/) override { return proxy.defined() ? proxy : out; }
  void finish() {
    if (proxy.defined()) const_cast<at::Tensor&>(out).copy_(proxy);
  }

  const at::Tensor& out;
  at::Tensor proxy;

 private:
  void resize_out(c10::IntArrayRef sizes, c10::IntArrayRef strides, const c10::TensorOptions& options) {
    TORCH_CHECK(options.dtype() == out.dtype(), "Expected out tensor to have dtype ", options.dtype(), ", but got ",
                out.dtype(), " instead");
    TORCH_CHECK(options.device() == out.device(), "Expected out tensor to have device ", options.device(),
                ", but got ", out.device(), " instead");
    const bool resized = at::native::resize_output(out, sizes);
    // As the CPU wrapper: restride only after a resize; otherwise the strides of `out`
    // stand and the meta function's are advisory.
    if (resized) {
      if (!strides.empty()) {
        const_cast<at::Tensor&>(out).as_strided_(sizes, strides);
      } else if (options.memory_format_opt().has_value()) {
        out.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
      }
    }
  }
};

}  // namespace torch_npu
