// torch.fft on float16 and complex32 npu tensors, as CUDA computes it with cuFFT.
//
// CUDA transforms half-precision signals whose every transformed size is a power of two
// and refuses the others; cpu has no half-precision FFT. Two things stand in the way on
// npu:
//
// - the torch.fft composites (fft_fft, fft_rfft2, ...) promote their input with a rule that
//   accepts float16 only on CUDA, XPU and meta devices, so a float16 npu tensor is refused
//   ("Unsupported dtype Half") before any npu kernel runs. An autograd kernel of npu for
//   each composite takes a float16 input past that rule: it runs the composite on the
//   input converted to float32 (exact) inside a half-precision scope and converts the
//   result to the dtype CUDA returns (complex32, or float16 for the complex-to-real
//   transforms). Autograd records the conversions and the composite's own operators, so
//   gradients flow as for float32. Every other input goes straight to the composite.
// - the transform kernels (_fft_c2c, _fft_r2c, _fft_c2r) apply cuFFT's rule: a float16 or
//   complex32 input, or any input inside the half-precision scope, needs power-of-two
//   signal sizes, with cuFFT's error otherwise. Inside the scope each transform's result
//   is rounded to half precision, as cuFFT's half-precision transforms store it, so a
//   composite of two transforms (hfft2: c2c then c2r) rounds between them as on CUDA.
//   Outside the scope the widening table (cuda_dtype_widening.cpp) computes complex32 and
//   float16 transforms in complex64/float32.
#include "torch_npu/csrc/aten/fallback.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/GradMode.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/library.h>

#include <string>
#include <vector>

namespace torch_npu {
namespace {

thread_local bool tls_half_precision_fft = false;

// While alive, the transforms compute as cuFFT's half-precision ones (see above).
class HalfPrecisionFftScope {
 public:
  HalfPrecisionFftScope() : previous_(tls_half_precision_fft) { tls_half_precision_fft = true; }
  ~HalfPrecisionFftScope() { tls_half_precision_fft = previous_; }
  HalfPrecisionFftScope(const HalfPrecisionFftScope&) = delete;
  HalfPrecisionFftScope& operator=(const HalfPrecisionFftScope&) = delete;

 private:
  bool previous_;
};

int64_t int_of(const c10::IValue& iv) { return iv.isInt() ? iv.toInt() : iv.toSymInt().guard_int(__FILE__, __LINE__); }

bool is_half_precision(at::ScalarType t) { return t == at::kHalf || t == at::kComplexHalf; }

// The sizes cuFFT plans for: the transformed dimensions of the input, and for a
// complex-to-real transform the real length of the last one.
std::vector<int64_t> signal_sizes(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t begin) {
  const at::Tensor& self = stack[begin].toTensor();
  std::vector<int64_t> sizes;
  for (const c10::IValue& d : stack[begin + 1].toListRef()) {
    sizes.push_back(self.size(c10::maybe_wrap_dim(int_of(d), self.dim())));
  }
  if (op.schema().name() == "aten::_fft_c2r" && !sizes.empty()) sizes.back() = int_of(stack[begin + 3]);
  return sizes;
}

void check_power_of_two_signal(const std::vector<int64_t>& sizes) {
  for (int64_t s : sizes) {
    TORCH_CHECK((s & (s - 1)) == 0,
                "cuFFT only supports dimensions whose sizes are powers of two when computing in half precision, "
                "but got a signal size of",
                c10::IntArrayRef(sizes));
  }
}

at::ScalarType half_precision_of(at::ScalarType t) { return c10::isComplexType(t) ? at::kComplexHalf : at::kHalf; }

// _fft_c2c, _fft_r2c, _fft_c2r and their out= forms.
void fft_transform(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t begin = stack->size() - op.schema().arguments().size();
  const bool in_scope = tls_half_precision_fft;
  if (in_scope || is_half_precision((*stack)[begin].toTensor().scalar_type())) {
    check_power_of_two_signal(signal_sizes(op, *stack, begin));
  }
  npu_fallback(op, ks, stack);
  if (!in_scope) return;
  const size_t num_returns = op.schema().returns().size();
  for (size_t r = stack->size() - num_returns; r < stack->size(); ++r) {
    at::Tensor result = (*stack)[r].toTensor();
    result.copy_(result.to(half_precision_of(result.scalar_type())));
  }
}

// The autograd kernel of the torch.fft composites (functional and out= forms).
void fft_composite(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t begin = stack->size() - schema.arguments().size();
  const at::Tensor self = (*stack)[begin].toTensor();
  if (self.scalar_type() != at::kHalf) {
    op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
    return;
  }
  const bool is_out = schema.overload_name() == "out";
  at::Tensor out;
  if (is_out) {
    out = stack->back().toTensor();
    stack->pop_back();
    TORCH_CHECK(!(c10::GradMode::is_enabled() && self.requires_grad()), schema.name().substr(6),
                "(): functions with out=... arguments don't support automatic differentiation, but one of the "
                "arguments requires grad.");
  }
  (*stack)[begin] = self.to(at::kFloat);
  at::Tensor wide;
  {
    HalfPrecisionFftScope scope;
    c10::Dispatcher::singleton().findSchemaOrThrow(schema.name().c_str(), "").callBoxed(stack);
    wide = stack->back().toTensor();
    stack->pop_back();
  }
  at::Tensor result = wide.to(half_precision_of(wide.scalar_type()));
  if (is_out) {
    at::native::resize_output(out, result.sizes());
    out.copy_(result);
    result = out;
  }
  stack->push_back(result);
}

constexpr const char* kFftComposites[] = {
    "fft_fft",  "fft_ifft",  "fft_rfft",  "fft_irfft",  "fft_hfft",  "fft_ihfft",
    "fft_fft2", "fft_ifft2", "fft_rfft2", "fft_irfft2", "fft_hfft2", "fft_ihfft2",
    "fft_fftn", "fft_ifftn", "fft_rfftn", "fft_irfftn", "fft_hfftn", "fft_ihfftn"};

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  for (const char* name : kFftComposites) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&fft_composite>());
    m.impl((std::string(name) + ".out").c_str(), torch::CppFunction::makeFromBoxedFunction<&fft_composite>());
  }
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"_fft_c2c", "_fft_r2c", "_fft_c2r"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&fft_transform>());
    m.impl((std::string(name) + ".out").c_str(), torch::CppFunction::makeFromBoxedFunction<&fft_transform>());
  }
}

}  // namespace torch_npu
