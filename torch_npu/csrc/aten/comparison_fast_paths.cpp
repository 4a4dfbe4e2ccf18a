// Unboxed npu kernels of the iterator operators that masks and attention code run: the
// comparisons (eq, ne, lt, le, gt, ge, against a tensor or a number, functional and in
// place), where, masked_fill_, logical_not, bitwise and/or, maximum/minimum, and the float
// unary operators cos, sin, log, reciprocal and erf.
//
// They follow elementwise_fast_paths.cpp (iterator_on_npu.h): when the fast path may
// serve a call, the structured kernel runs on the npu tensors themselves and the stub's npu
// entry runs the CPU loop. where, masked_fill_ and logical_not are not structured: their
// CPU kernels (TensorCompare.cpp, TensorAdvancedIndexing.cpp, UnaryOps.cpp) are written for
// any device (they build their TensorIterator from the tensors they get, convert dtypes
// with `to`, and call the stub of the iterator's device), so they run on the npu tensors
// as CUDA's kernels run on CUDA tensors. Every other call goes to the operator fallback.

// First: it sets up DispatchStub.h for calling the stubs' CPU kernels.
#include "torch_npu/csrc/aten/iterator_on_npu.h"

#include "torch_npu/csrc/aten/fast_path.h"
#include "torch_npu/csrc/graphs/capture.h"

#include <ATen/ScalarOps.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/IndexKernel.h>
#include <ATen/native/TensorCompare.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/bitwise_and_cpu_dispatch.h>
#include <ATen/ops/bitwise_and_native.h>
#include <ATen/ops/bitwise_or_cpu_dispatch.h>
#include <ATen/ops/bitwise_or_native.h>
#include <ATen/ops/cos_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq_cpu_dispatch.h>
#include <ATen/ops/eq_native.h>
#include <ATen/ops/erf_native.h>
#include <ATen/ops/ge_cpu_dispatch.h>
#include <ATen/ops/ge_native.h>
#include <ATen/ops/gt_cpu_dispatch.h>
#include <ATen/ops/gt_native.h>
#include <ATen/ops/le_cpu_dispatch.h>
#include <ATen/ops/le_native.h>
#include <ATen/ops/log_native.h>
#include <ATen/ops/logical_not_native.h>
#include <ATen/ops/lt_cpu_dispatch.h>
#include <ATen/ops/lt_native.h>
#include <ATen/ops/masked_fill_native.h>
#include <ATen/ops/maximum_cpu_dispatch.h>
#include <ATen/ops/maximum_native.h>
#include <ATen/ops/minimum_cpu_dispatch.h>
#include <ATen/ops/minimum_native.h>
#include <ATen/ops/ne_cpu_dispatch.h>
#include <ATen/ops/ne_native.h>
#include <ATen/ops/reciprocal_native.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/where_native.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

// The stubs' npu entries: the CPU kernels, over the same memory.
#define NPU_ITERATOR_ON_HOST(STUB, ITERATOR) \
  void STUB##_on_host(ITERATOR& iter) { at::native::STUB(c10::DeviceType::CPU, iter); }
NPU_ITERATOR_ON_HOST(eq_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(ne_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(lt_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(le_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(gt_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(ge_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(bitwise_and_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(bitwise_or_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(maximum_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(minimum_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(logical_not_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(cos_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(sin_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(log_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(reciprocal_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(erf_stub, at::TensorIteratorBase)
NPU_ITERATOR_ON_HOST(where_kernel, at::TensorIterator)
#undef NPU_ITERATOR_ON_HOST
void masked_fill_stub_on_host(at::TensorIterator& iter, const c10::Scalar& value) {
  at::native::masked_fill_stub(c10::DeviceType::CPU, iter, value);
}

}  // namespace
}  // namespace torch_npu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(eq_stub, &torch_npu::eq_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(ne_stub, &torch_npu::ne_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(lt_stub, &torch_npu::lt_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(le_stub, &torch_npu::le_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(gt_stub, &torch_npu::gt_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(ge_stub, &torch_npu::ge_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(bitwise_and_stub, &torch_npu::bitwise_and_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(bitwise_or_stub, &torch_npu::bitwise_or_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(maximum_stub, &torch_npu::maximum_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(minimum_stub, &torch_npu::minimum_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(logical_not_stub, &torch_npu::logical_not_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(cos_stub, &torch_npu::cos_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(sin_stub, &torch_npu::sin_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(log_stub, &torch_npu::log_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(reciprocal_stub, &torch_npu::reciprocal_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(erf_stub, &torch_npu::erf_stub_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(where_kernel, &torch_npu::where_kernel_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(masked_fill_stub, &torch_npu::masked_fill_stub_on_host)
}  // namespace at::native

namespace torch_npu {
namespace {

// ---- binary operators against a tensor: eq, ..., bitwise_and/or, maximum/minimum --------

#define NPU_FAST_BINARY_TENSOR(NAME)                                                                              \
  at::Tensor npu_##NAME(const at::Tensor& self, const at::Tensor& other) {                                         \
    static FastOperator fast("aten::" #NAME, "Tensor");                                                            \
    return BinaryFastPath<at::native::structured_##NAME##_Tensor_out, false>::functional(                          \
        fast.op, fast.counter, self, other,                                                                        \
        [](const at::Tensor& a, const at::Tensor& b) { return at::cpu::NAME(a, b); });                             \
  }                                                                                                                \
  at::Tensor& npu_##NAME##_(at::Tensor& self, const at::Tensor& other) {                                           \
    static FastOperator fast("aten::" #NAME "_", "Tensor");                                                        \
    BinaryFastPath<at::native::structured_##NAME##_Tensor_out, false>::in_place(                                   \
        fast.op, fast.counter, self, other, [](at::Tensor& a, const at::Tensor& b) { at::cpu::NAME##_(a, b); }); \
    return self;                                                                                                   \
  }

NPU_FAST_BINARY_TENSOR(eq)
NPU_FAST_BINARY_TENSOR(ne)
NPU_FAST_BINARY_TENSOR(lt)
NPU_FAST_BINARY_TENSOR(le)
NPU_FAST_BINARY_TENSOR(gt)
NPU_FAST_BINARY_TENSOR(ge)
#undef NPU_FAST_BINARY_TENSOR

// bitwise_and/or's structured kernels are named for their out= form; maximum and minimum
// have no in-place form.
at::Tensor npu_bitwise_and(const at::Tensor& self, const at::Tensor& other) {
  static FastOperator fast("aten::bitwise_and", "Tensor");
  return BinaryFastPath<at::native::structured_bitwise_and_out, false>::functional(
      fast.op, fast.counter, self, other,
      [](const at::Tensor& a, const at::Tensor& b) { return at::cpu::bitwise_and(a, b); });
}
at::Tensor& npu_bitwise_and_(at::Tensor& self, const at::Tensor& other) {
  static FastOperator fast("aten::bitwise_and_", "Tensor");
  BinaryFastPath<at::native::structured_bitwise_and_out, false>::in_place(
      fast.op, fast.counter, self, other, [](at::Tensor& a, const at::Tensor& b) { at::cpu::bitwise_and_(a, b); });
  return self;
}
at::Tensor npu_bitwise_or(const at::Tensor& self, const at::Tensor& other) {
  static FastOperator fast("aten::bitwise_or", "Tensor");
  return BinaryFastPath<at::native::structured_bitwise_or_out, false>::functional(
      fast.op, fast.counter, self, other,
      [](const at::Tensor& a, const at::Tensor& b) { return at::cpu::bitwise_or(a, b); });
}
at::Tensor& npu_bitwise_or_(at::Tensor& self, const at::Tensor& other) {
  static FastOperator fast("aten::bitwise_or_", "Tensor");
  BinaryFastPath<at::native::structured_bitwise_or_out, false>::in_place(
      fast.op, fast.counter, self, other, [](at::Tensor& a, const at::Tensor& b) { at::cpu::bitwise_or_(a, b); });
  return self;
}
at::Tensor npu_maximum(const at::Tensor& self, const at::Tensor& other) {
  static FastOperator fast("aten::maximum", "");
  return BinaryFastPath<at::native::structured_maximum_out, false>::functional(
      fast.op, fast.counter, self, other,
      [](const at::Tensor& a, const at::Tensor& b) { return at::cpu::maximum(a, b); });
}
at::Tensor npu_minimum(const at::Tensor& self, const at::Tensor& other) {
  static FastOperator fast("aten::minimum", "");
  return BinaryFastPath<at::native::structured_minimum_out, false>::functional(
      fast.op, fast.counter, self, other,
      [](const at::Tensor& a, const at::Tensor& b) { return at::cpu::minimum(a, b); });
}

// ---- comparisons against a number ------------------------------------------------------
//
// The meta function of `eq.Scalar` is the one of `eq.Tensor` with the number as a wrapped
// cpu 0-dim tensor, and both impls call the same stub: the Tensor kernel runs on the npu
// tensor and the wrapped number, converted as iterator_operand converts a cpu value. Calls
// it cannot convert exactly take the CPU kernel on the CPU alias.
template <typename Structured>
struct ScalarComparison {
  template <typename CpuKernel>
  static at::Tensor functional(const c10::OperatorHandle& op, FastPathCounter& counter, const at::Tensor& self,
                               const c10::Scalar& other, CpuKernel cpu_kernel) {
    const c10::DeviceIndex device = fast_unary_device(self);
    if (device < 0) return run_fallback(op, self, other).toTensor();
    counter.hit();
    const at::Tensor value = at::native::wrapped_scalar_tensor(other);
    at::Tensor converted;
    const at::Tensor* operand = iterator_operand(self, value, /*integer_to_float=*/false, converted);
    CurrentDeviceScope device_scope(device);
    if (operand == nullptr) {
      at::Tensor cpu_self = cpu_alias(self);
      CpuAllocationRedirect redirect(device);
      return adopt_cpu_result(cpu_kernel(cpu_self), device);
    }
    NpuFunctional<Structured> kernel;
    kernel.meta(self, *operand);
    kernel.impl(self, *operand, kernel.output);
    return std::move(kernel.output);
  }

  template <typename CpuKernel>
  static void in_place(const c10::OperatorHandle& op, FastPathCounter& counter, const at::Tensor& self,
                       const c10::Scalar& other, CpuKernel cpu_kernel) {
    const c10::DeviceIndex device = fast_unary_device(self);
    if (device < 0) {
      run_fallback(op, self, other);
      return;
    }
    counter.hit();
    const at::Tensor value = at::native::wrapped_scalar_tensor(other);
    at::Tensor converted;
    const at::Tensor* operand = iterator_operand(self, value, /*integer_to_float=*/false, converted);
    if (operand == nullptr) {
      at::Tensor cpu_self = cpu_alias(self);
      CurrentDeviceScope device_scope(device);
      CpuAllocationRedirect redirect(device);
      cpu_kernel(cpu_self);
      return;
    }
    NpuInPlace<Structured> kernel(self);
    kernel.meta(self, *operand);
    kernel.impl(self, *operand, self);
  }
};

#define NPU_FAST_COMPARISON_SCALAR(NAME)                                                                  \
  at::Tensor npu_##NAME##_scalar(const at::Tensor& self, const at::Scalar& other) {                        \
    static FastOperator fast("aten::" #NAME, "Scalar");                                                    \
    return ScalarComparison<at::native::structured_##NAME##_Tensor_out>::functional(                       \
        fast.op, fast.counter, self, other, [&](const at::Tensor& a) { return at::cpu::NAME(a, other); }); \
  }                                                                                                        \
  at::Tensor& npu_##NAME##_scalar_(at::Tensor& self, const at::Scalar& other) {                            \
    static FastOperator fast("aten::" #NAME "_", "Scalar");                                                \
    ScalarComparison<at::native::structured_##NAME##_Tensor_out>::in_place(                                \
        fast.op, fast.counter, self, other, [&](at::Tensor& a) { at::cpu::NAME##_(a, other); });           \
    return self;                                                                                           \
  }

NPU_FAST_COMPARISON_SCALAR(eq)
NPU_FAST_COMPARISON_SCALAR(ne)
NPU_FAST_COMPARISON_SCALAR(lt)
NPU_FAST_COMPARISON_SCALAR(le)
NPU_FAST_COMPARISON_SCALAR(gt)
NPU_FAST_COMPARISON_SCALAR(ge)
#undef NPU_FAST_COMPARISON_SCALAR

// ---- float unary operators -------------------------------------------------------------

#define NPU_FAST_FLOAT_UNARY(NAME)                                                                           \
  at::Tensor npu_##NAME(const at::Tensor& self) {                                                             \
    static FastOperator fast("aten::" #NAME, "");                                                             \
    return UnaryFastPath<at::native::structured_##NAME##_out, true>::functional(fast.op, fast.counter, self); \
  }                                                                                                           \
  at::Tensor& npu_##NAME##_(at::Tensor& self) {                                                               \
    static FastOperator fast("aten::" #NAME "_", "");                                                         \
    UnaryFastPath<at::native::structured_##NAME##_out, true>::in_place(fast.op, fast.counter, self);          \
    return self;                                                                                              \
  }

NPU_FAST_FLOAT_UNARY(cos)
NPU_FAST_FLOAT_UNARY(sin)
NPU_FAST_FLOAT_UNARY(log)
NPU_FAST_FLOAT_UNARY(reciprocal)
NPU_FAST_FLOAT_UNARY(erf)
#undef NPU_FAST_FLOAT_UNARY

// ---- the kernels written for any device ------------------------------------------------

at::Tensor npu_where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  static FastOperator fast("aten::where", "self");
  c10::DeviceIndex device;
  if (!admit_npu_tensors(device, condition, self, other)) {
    return run_fallback(fast.op, condition, self, other).toTensor();
  }
  fast.counter.hit();
  CurrentDeviceScope device_scope(device);
  return at::native::where(condition, self, other);
}

at::Tensor& npu_where_out(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other,
                          at::Tensor& out) {
  static FastOperator fast("aten::where", "self_out");
  c10::DeviceIndex device;
  if (!admit_npu_tensors(device, condition, self, other, out)) {
    run_fallback(fast.op, condition, self, other, out);
    return out;
  }
  fast.counter.hit();
  CurrentDeviceScope device_scope(device);
  return at::native::where_self_out(condition, self, other, out);
}

at::Tensor& npu_masked_fill_scalar_(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  static FastOperator fast("aten::masked_fill_", "Scalar");
  c10::DeviceIndex device;
  if (!admit_npu_tensors(device, self, mask)) {
    run_fallback(fast.op, self, mask, value);
    return self;
  }
  fast.counter.hit();
  CurrentDeviceScope device_scope(device);
  return at::native::masked_fill__cpu(self, mask, value);
}

// The value is read with `item()`: an npu value of the same device only (a cpu one takes
// the fallback and its rule for cpu arguments).
at::Tensor& npu_masked_fill_tensor_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  static FastOperator fast("aten::masked_fill_", "Tensor");
  c10::DeviceIndex device;
  if (!admit_npu_tensors(device, self, mask, value)) {
    run_fallback(fast.op, self, mask, value);
    return self;
  }
  fast.counter.hit();
  CurrentDeviceScope device_scope(device);
  return at::native::masked_fill__cpu(self, mask, value);
}

// The CPU kernel of logical_not is its out= kernel on a new bool tensor (UnaryOps.cpp).
at::Tensor npu_logical_not(const at::Tensor& self) {
  static FastOperator fast("aten::logical_not", "");
  c10::DeviceIndex device;
  if (!admit_npu_tensors(device, self)) return run_fallback(fast.op, self).toTensor();
  fast.counter.hit();
  CurrentDeviceScope device_scope(device);
  at::Tensor result = at::empty({0}, self.options().dtype(at::kBool));
  at::native::logical_not_out(self, result);
  return result;
}

at::Tensor& npu_logical_not_(at::Tensor& self) {
  static FastOperator fast("aten::logical_not_", "");
  c10::DeviceIndex device;
  if (!admit_npu_tensors(device, self)) {
    run_fallback(fast.op, self);
    return self;
  }
  fast.counter.hit();
  CurrentDeviceScope device_scope(device);
  return at::native::logical_not_out(self, self);
}

}  // namespace

void register_comparison_fast_paths(torch::Library& m) {
#define NPU_REGISTER_COMPARISON(NAME)                        \
  m.impl(#NAME ".Tensor", TORCH_FN(npu_##NAME));             \
  m.impl(#NAME "_.Tensor", TORCH_FN(npu_##NAME##_));         \
  m.impl(#NAME ".Scalar", TORCH_FN(npu_##NAME##_scalar));    \
  m.impl(#NAME "_.Scalar", TORCH_FN(npu_##NAME##_scalar_));
  NPU_REGISTER_COMPARISON(eq)
  NPU_REGISTER_COMPARISON(ne)
  NPU_REGISTER_COMPARISON(lt)
  NPU_REGISTER_COMPARISON(le)
  NPU_REGISTER_COMPARISON(gt)
  NPU_REGISTER_COMPARISON(ge)
#undef NPU_REGISTER_COMPARISON
  m.impl("bitwise_and.Tensor", TORCH_FN(npu_bitwise_and));
  m.impl("bitwise_and_.Tensor", TORCH_FN(npu_bitwise_and_));
  m.impl("bitwise_or.Tensor", TORCH_FN(npu_bitwise_or));
  m.impl("bitwise_or_.Tensor", TORCH_FN(npu_bitwise_or_));
  m.impl("maximum", TORCH_FN(npu_maximum));
  m.impl("minimum", TORCH_FN(npu_minimum));
#define NPU_REGISTER_UNARY(NAME)             \
  m.impl(#NAME, TORCH_FN(npu_##NAME));       \
  m.impl(#NAME "_", TORCH_FN(npu_##NAME##_));
  NPU_REGISTER_UNARY(cos)
  NPU_REGISTER_UNARY(sin)
  NPU_REGISTER_UNARY(log)
  NPU_REGISTER_UNARY(reciprocal)
  NPU_REGISTER_UNARY(erf)
  NPU_REGISTER_UNARY(logical_not)
#undef NPU_REGISTER_UNARY
  m.impl("where.self", TORCH_FN(npu_where));
  m.impl("where.self_out", TORCH_FN(npu_where_out));
  m.impl("masked_fill_.Scalar", TORCH_FN(npu_masked_fill_scalar_));
  m.impl("masked_fill_.Tensor", TORCH_FN(npu_masked_fill_tensor_));
}

}  // namespace torch_npu
