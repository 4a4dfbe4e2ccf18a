// Unboxed npu kernels of add, sub, mul, div, relu and the unary ops of transformer
// activations and norms (exp, neg, rsqrt, sigmoid, silu, sqrt, tanh, pow with a scalar
// exponent), functional and in place: the small ops a model runs most.
//
// When the fast path may serve a call (fast_path.h: nothing observes, nothing captures,
// plain strided tensors of one npu device or a cpu 0-dim value), the kernel runs ATen's
// structured kernel on the npu tensors themselves: the operator's meta function builds the
// TensorIterator (type promotion, broadcasting, overlap checks, output geometry), the
// output is allocated by the device's caching allocator, and the DispatchStub runs the CPU
// loop, which only reads data pointers (npu memory is host memory). No CPU alias, no
// adopted storage. Calls whose iterator would need dtype-converting copies (TensorIterator
// makes those only on cpu, its common device there) run the CPU kernel on CPU aliases
// instead, unless the only copy is of a cpu value and replaying it is exact
// (iterator_operand); every other call goes to the operator fallback. All three give cpu's
// results and cpu's (or CUDA's) errors.

// First: it sets up DispatchStub.h for calling the stubs' CPU kernels.
#include "torch_npu/csrc/aten/iterator_on_npu.h"

#include "torch_npu/csrc/aten/cpu_aliases.h"
#include "torch_npu/csrc/aten/fallback.h"
#include "torch_npu/csrc/aten/fast_path.h"
#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/runtime/allocator.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Activation.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Pow.h>
#include <ATen/native/TensorCompare.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/add_cpu_dispatch.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/clamp_min_native.h>
#include <ATen/ops/div_cpu_dispatch.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/exp_native.h>
#include <ATen/ops/mul_cpu_dispatch.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/pow_native.h>
#include <ATen/ops/rsqrt_native.h>
#include <ATen/ops/sigmoid_native.h>
#include <ATen/ops/silu_native.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/sub_cpu_dispatch.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/tanh_native.h>
#include <c10/core/DefaultDtype.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

// The stubs' npu entries: the structured kernels' impl calls a stub for the iterator's
// device, npu here, and npu's kernel is the CPU loop over the same memory.
void add_on_host(at::TensorIteratorBase& iter, const c10::Scalar& alpha) {
  at::native::add_stub(c10::DeviceType::CPU, iter, alpha);
}
void mul_on_host(at::TensorIteratorBase& iter) { at::native::mul_stub(c10::DeviceType::CPU, iter); }
void div_true_on_host(at::TensorIteratorBase& iter) { at::native::div_true_stub(c10::DeviceType::CPU, iter); }
void clamp_min_on_host(at::TensorIteratorBase& iter, c10::Scalar min) {
  at::native::clamp_min_scalar_stub(c10::DeviceType::CPU, iter, std::move(min));
}
void pow_tensor_scalar_on_host(at::TensorIteratorBase& iter, const c10::Scalar& exponent) {
  at::native::pow_tensor_scalar_stub(c10::DeviceType::CPU, iter, exponent);
}
void silu_on_host(at::TensorIteratorBase& iter) { at::native::silu_stub(c10::DeviceType::CPU, iter); }

// The unary stubs (UnaryOps.h) all take the iterator alone.
#define NPU_UNARY_ON_HOST(STUB) \
  void STUB##_on_host(at::TensorIteratorBase& iter) { at::native::STUB(c10::DeviceType::CPU, iter); }
NPU_UNARY_ON_HOST(exp_stub)
NPU_UNARY_ON_HOST(neg_stub)
NPU_UNARY_ON_HOST(rsqrt_stub)
NPU_UNARY_ON_HOST(sigmoid_stub)
NPU_UNARY_ON_HOST(sqrt_stub)
NPU_UNARY_ON_HOST(tanh_stub)
#undef NPU_UNARY_ON_HOST

}  // namespace
}  // namespace torch_npu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(add_stub, &torch_npu::add_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(mul_stub, &torch_npu::mul_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(div_true_stub, &torch_npu::div_true_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(clamp_min_scalar_stub, &torch_npu::clamp_min_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(pow_tensor_scalar_stub, &torch_npu::pow_tensor_scalar_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(silu_stub, &torch_npu::silu_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(exp_stub, &torch_npu::exp_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(neg_stub, &torch_npu::neg_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(rsqrt_stub, &torch_npu::rsqrt_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(sigmoid_stub, &torch_npu::sigmoid_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(sqrt_stub, &torch_npu::sqrt_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(tanh_stub, &torch_npu::tanh_stub_on_host)
}  // namespace at::native

namespace torch_npu {

// The device the fast path runs `self (op) other` on, or -1 when the fallback must run it.
c10::DeviceIndex fast_binary_device(const c10::OperatorHandle& op, const at::Tensor& self, const at::Tensor& other) {
  if (!fast_paths_allowed() || !is_plain_npu(self)) return -1;
  const c10::DeviceIndex device = self.device().index();
  if (is_plain_npu(other)) {
    if (other.device().index() != device) return -1;
  } else if (other.defined() && other.device().type() == c10::kCPU && other.layout() == at::kStrided &&
             other.dim() == 0 && other.scalar_type() != at::kComplexHalf) {
    check_foreign_argument(op, 1, other, device);  // the fallback's rule for a cpu value
  } else {
    return -1;
  }
  // Last: a capture may start on another thread at any time, but only work queued on a
  // capturing stream is recorded, and that is this thread's current stream.
  if (active_capture() != nullptr) return -1;
  return device;
}

// The second operand of an iterator over the npu tensors themselves: `other`, or a cpu
// value converted to the common dtype as cpu's TensorIterator converts it; nullptr when
// the iterator would need to convert `self` or an npu operand (those calls take the CPU
// aliases, where TensorIterator makes the converting copies). `integer_to_float` is the
// iterator's promotion of integer inputs to the default float dtype (true division).
const at::Tensor* iterator_operand(const at::Tensor& self, const at::Tensor& other, bool integer_to_float,
                                   at::Tensor& converted) {
  const at::ScalarType self_dtype = self.scalar_type();
  if (other.scalar_type() == self_dtype) {
    return integer_to_float && c10::isIntegralType(self_dtype, /*includeBool=*/true) ? nullptr : &other;
  }
  // sub's meta function refuses a bool operand: it must see the value's own dtype.
  if (other.device().type() != c10::kCPU || other.scalar_type() == at::kBool) return nullptr;
  at::ScalarType common = at::native::result_type(
      at::native::update_result_type_state(other, at::native::update_result_type_state(self, {})));
  if (integer_to_float && c10::isIntegralType(common, /*includeBool=*/true)) {
    common = c10::typeMetaToScalarType(c10::get_default_dtype());
  }
  // Half and BFloat16 mul and div read a scalar operand's value as it was before the
  // conversion (TensorIterator keeps the original): convert it only where nothing reads it.
  if (common != self_dtype || at::isReducedFloatingType(common)) return nullptr;
  converted = other.to(common);
  return &converted;
}

// The CPU alias of `t` if it is an npu tensor; a cpu value as it is.
at::Tensor cpu_side(const at::Tensor& t, CpuAliasSet& aliases) {
  return t.device().type() == kNpu ? aliases.alias(t) : t;
}

// relu and the unary operators: one npu tensor.
c10::DeviceIndex fast_unary_device(const at::Tensor& self) {
  if (!fast_paths_allowed() || !is_plain_npu(self)) return -1;
  if (active_capture() != nullptr) return -1;  // last, as in fast_binary_device
  return self.device().index();
}


namespace {

#define NPU_FAST_BINARY_WITH_ALPHA(NAME, STRUCTURED)                                                             \
  at::Tensor npu_##NAME(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {             \
    static const c10::OperatorHandle& op = aten_op("aten::" #NAME, "Tensor");                                    \
    static FastPathCounter counter("aten::" #NAME ".Tensor");                                                    \
    return BinaryFastPath<STRUCTURED, false>::functional(                                                        \
        op, counter, self, other,                                                                                \
        [&](const at::Tensor& a, const at::Tensor& b) { return at::cpu::NAME(a, b, alpha); }, alpha);            \
  }                                                                                                              \
  at::Tensor& npu_##NAME##_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {               \
    static const c10::OperatorHandle& op = aten_op("aten::" #NAME "_", "Tensor");                                \
    static FastPathCounter counter("aten::" #NAME "_.Tensor");                                                   \
    BinaryFastPath<STRUCTURED, false>::in_place(                                                                 \
        op, counter, self, other, [&](at::Tensor& a, const at::Tensor& b) { at::cpu::NAME##_(a, b, alpha); },    \
        alpha);                                                                                                  \
    return self;                                                                                                 \
  }

#define NPU_FAST_BINARY(NAME, STRUCTURED, INTEGER_TO_FLOAT)                                                      \
  at::Tensor npu_##NAME(const at::Tensor& self, const at::Tensor& other) {                                       \
    static const c10::OperatorHandle& op = aten_op("aten::" #NAME, "Tensor");                                    \
    static FastPathCounter counter("aten::" #NAME ".Tensor");                                                    \
    return BinaryFastPath<STRUCTURED, INTEGER_TO_FLOAT>::functional(                                             \
        op, counter, self, other, [](const at::Tensor& a, const at::Tensor& b) { return at::cpu::NAME(a, b); }); \
  }                                                                                                              \
  at::Tensor& npu_##NAME##_(at::Tensor& self, const at::Tensor& other) {                                         \
    static const c10::OperatorHandle& op = aten_op("aten::" #NAME "_", "Tensor");                                \
    static FastPathCounter counter("aten::" #NAME "_.Tensor");                                                   \
    BinaryFastPath<STRUCTURED, INTEGER_TO_FLOAT>::in_place(                                                      \
        op, counter, self, other, [](at::Tensor& a, const at::Tensor& b) { at::cpu::NAME##_(a, b); });           \
    return self;                                                                                                 \
  }

NPU_FAST_BINARY_WITH_ALPHA(add, at::native::structured_ufunc_add_CPU)
NPU_FAST_BINARY_WITH_ALPHA(sub, at::native::structured_sub_out)
NPU_FAST_BINARY(mul, at::native::structured_mul_out, false)
NPU_FAST_BINARY(div, at::native::structured_div_out, true)

#undef NPU_FAST_BINARY_WITH_ALPHA
#undef NPU_FAST_BINARY

// relu and relu_: the CPU kernel (Activation.cpp) refuses bool, then is clamp_min(self, 0),
// a structured kernel like the ones above; one npu tensor, nothing to convert.
at::Tensor npu_relu(const at::Tensor& self) {
  static const c10::OperatorHandle& op = aten_op("aten::relu", "");
  static FastPathCounter counter("aten::relu");
  const c10::DeviceIndex device = fast_unary_device(self);
  if (device < 0) return run_fallback(op, self).toTensor();
  counter.hit();
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  CurrentDeviceScope device_scope(device);
  NpuFunctional<at::native::structured_clamp_min_out> kernel;
  kernel.meta(self, 0);
  kernel.impl(self, 0, kernel.output);
  return std::move(kernel.output);
}

at::Tensor& npu_relu_(at::Tensor& self) {
  static const c10::OperatorHandle& op = aten_op("aten::relu_", "");
  static FastPathCounter counter("aten::relu_");
  if (fast_unary_device(self) < 0) {
    run_fallback(op, self);
    return self;
  }
  counter.hit();
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  NpuInPlace<at::native::structured_clamp_min_out> kernel(self);
  kernel.meta(self, 0);
  kernel.impl(self, 0, self);
  return self;
}

#define NPU_FAST_UNARY(NAME, INTEGER_TO_FLOAT)                                                                   \
  at::Tensor npu_##NAME(const at::Tensor& self) {                                                                \
    static const c10::OperatorHandle& op = aten_op("aten::" #NAME, "");                                          \
    static FastPathCounter counter("aten::" #NAME);                                                              \
    return UnaryFastPath<at::native::structured_##NAME##_out, INTEGER_TO_FLOAT>::functional(op, counter, self);  \
  }                                                                                                              \
  at::Tensor& npu_##NAME##_(at::Tensor& self) {                                                                  \
    static const c10::OperatorHandle& op = aten_op("aten::" #NAME "_", "");                                      \
    static FastPathCounter counter("aten::" #NAME "_");                                                          \
    UnaryFastPath<at::native::structured_##NAME##_out, INTEGER_TO_FLOAT>::in_place(op, counter, self);           \
    return self;                                                                                                 \
  }

NPU_FAST_UNARY(exp, true)
NPU_FAST_UNARY(neg, false)  // its meta function refuses bool, as on cpu
NPU_FAST_UNARY(rsqrt, true)
NPU_FAST_UNARY(sigmoid, true)
NPU_FAST_UNARY(silu, false)  // its stub refuses integers, as on cpu
NPU_FAST_UNARY(sqrt, true)
NPU_FAST_UNARY(tanh, true)

#undef NPU_FAST_UNARY

// pow(Tensor, Scalar): its meta function picks the result dtype from the base and the
// exponent and converts the base itself, so no input needs the fallback.
using PowTensorScalarFastPath = UnaryFastPath<at::native::structured_pow_Tensor_Scalar_out, false>;

at::Tensor npu_pow_tensor_scalar(const at::Tensor& self, const at::Scalar& exponent) {
  static const c10::OperatorHandle& op = aten_op("aten::pow", "Tensor_Scalar");
  static FastPathCounter counter("aten::pow.Tensor_Scalar");
  return PowTensorScalarFastPath::functional(op, counter, self, exponent);
}

at::Tensor& npu_pow_scalar_(at::Tensor& self, const at::Scalar& exponent) {
  static const c10::OperatorHandle& op = aten_op("aten::pow_", "Scalar");
  static FastPathCounter counter("aten::pow_.Scalar");
  PowTensorScalarFastPath::in_place(op, counter, self, exponent);
  return self;
}

}  // namespace

void register_elementwise_fast_paths(torch::Library& m) {
  m.impl("add.Tensor", TORCH_FN(npu_add));
  m.impl("add_.Tensor", TORCH_FN(npu_add_));
  m.impl("sub.Tensor", TORCH_FN(npu_sub));
  m.impl("sub_.Tensor", TORCH_FN(npu_sub_));
  m.impl("mul.Tensor", TORCH_FN(npu_mul));
  m.impl("mul_.Tensor", TORCH_FN(npu_mul_));
  m.impl("div.Tensor", TORCH_FN(npu_div));
  m.impl("div_.Tensor", TORCH_FN(npu_div_));
  m.impl("relu", TORCH_FN(npu_relu));
  m.impl("relu_", TORCH_FN(npu_relu_));
  m.impl("exp", TORCH_FN(npu_exp));
  m.impl("exp_", TORCH_FN(npu_exp_));
  m.impl("neg", TORCH_FN(npu_neg));
  m.impl("neg_", TORCH_FN(npu_neg_));
  m.impl("rsqrt", TORCH_FN(npu_rsqrt));
  m.impl("rsqrt_", TORCH_FN(npu_rsqrt_));
  m.impl("sigmoid", TORCH_FN(npu_sigmoid));
  m.impl("sigmoid_", TORCH_FN(npu_sigmoid_));
  m.impl("silu", TORCH_FN(npu_silu));
  m.impl("silu_", TORCH_FN(npu_silu_));
  m.impl("sqrt", TORCH_FN(npu_sqrt));
  m.impl("sqrt_", TORCH_FN(npu_sqrt_));
  m.impl("tanh", TORCH_FN(npu_tanh));
  m.impl("tanh_", TORCH_FN(npu_tanh_));
  m.impl("pow.Tensor_Scalar", TORCH_FN(npu_pow_tensor_scalar));
  m.impl("pow_.Scalar", TORCH_FN(npu_pow_scalar_));
}

}  // namespace torch_npu
