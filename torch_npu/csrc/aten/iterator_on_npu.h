// Running an operator's structured CPU kernel on npu tensors themselves.
//
// The operator's meta function builds the TensorIterator over the npu tensors (type
// promotion, broadcasting, overlap checks, output geometry), the output comes from the
// device's caching allocator, and the operator's DispatchStub, given an npu entry that
// forwards to its CPU kernel (REGISTER_PRIVATEUSE1_DISPATCH), runs the CPU loop over the
// same memory (npu memory is host memory). Kernels written for any device run on npu
// tensors the same way. The pieces here are shared by the fast paths that do so
// (elementwise_fast_paths.cpp, comparison_fast_paths.cpp, fill_copy_fast_paths.cpp);
// fast_path.h says when a fast path may serve a call.
#pragma once

#include "torch_npu/csrc/aten/cpu_dispatch_stub.h"  // first: see there

#include "torch_npu/csrc/aten/cpu_aliases.h"
#include "torch_npu/csrc/aten/fast_path.h"
#include "torch_npu/csrc/aten/structured_on_npu.h"
#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/runtime/allocator.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>

#include <utility>

namespace torch_npu {

// The functional form of structured kernel `Structured` (ATen's CPU one): the iterator's
// output is a new npu tensor on the current device, of the geometry the iterator asks
// for (as the generated CPU wrapper's create_out).
template <typename Structured>
struct NpuFunctional final : Structured {
  void set_output_raw_strided(int64_t output_idx, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    output = empty_npu_output(sizes, strides, options);
    Structured::set_output_raw_strided(output_idx, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t /*output_idx*/) override { return output; }
  at::Tensor output;
};

// The in-place form: the output is `self`, checked as the generated in-place wrapper checks
// it (TensorIterator has refused a mismatch already; this keeps the wrapper's guarantee).
template <typename Structured>
struct NpuInPlace final : Structured {
  explicit NpuInPlace(const at::Tensor& self) : self(self) {}
  void set_output_raw_strided(int64_t output_idx, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    TORCH_CHECK(options.dtype() == self.dtype(), "Bad in-place call: input tensor dtype ", self.dtype(),
                " and output tensor dtype ", options.dtype(), " should match");
    TORCH_CHECK(options.device() == self.device(), "Bad in-place call: input tensor device ", self.device(),
                " and output tensor device ", options.device(), " should match");
    TORCH_CHECK(sizes == self.sizes(), "Bad in-place call: input tensor size ", self.sizes(),
                " and output tensor size ", sizes, " should match");
    Structured::set_output_raw_strided(output_idx, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t /*output_idx*/) override { return self; }
  const at::Tensor& self;
};

// The device the fast path runs `self (op) other` on, or -1 when the fallback must run it.
c10::DeviceIndex fast_binary_device(const c10::OperatorHandle& op, const at::Tensor& self, const at::Tensor& other);

// The second operand of an iterator over the npu tensors themselves: `other`, or a cpu
// value converted to the common dtype as cpu's TensorIterator converts it; nullptr when
// the iterator would need to convert `self` or an npu operand (those calls take the CPU
// aliases, where TensorIterator makes the converting copies). `integer_to_float` is the
// iterator's promotion of integer inputs to the default float dtype (true division).
const at::Tensor* iterator_operand(const at::Tensor& self, const at::Tensor& other, bool integer_to_float,
                                   at::Tensor& converted);

// The CPU alias of `t` if it is an npu tensor; a cpu value as it is.
at::Tensor cpu_side(const at::Tensor& t, CpuAliasSet& aliases);

// The device the fast path runs a unary `op(self)` on, or -1 when the fallback must run it.
c10::DeviceIndex fast_unary_device(const at::Tensor& self);

// True when a CPU kernel written for any device (one that builds its TensorIterator from
// the tensors it gets and calls the stub of the iterator's device) may run on these npu
// tensors: the fast path's rule, all of them plain npu tensors of one device, `device`.
// That device is to be the current one while the kernel runs (its allocations go there).
template <typename... Tensors>
bool admit_npu_tensors(c10::DeviceIndex& device, const Tensors&... tensors) {
  if (!fast_paths_allowed()) return false;
  device = -1;
  for (const at::Tensor* t : {&tensors...}) {
    if (!is_plain_npu(*t)) return false;
    if (device < 0) device = t->device().index();
    if (t->device().index() != device) return false;
  }
  return active_capture() == nullptr;  // last, as in fast_binary_device
}

// `self (op) other` with `cpu_kernel`, the CPU kernel of `op`, on CPU aliases.
template <typename CpuKernel>
at::Tensor binary_on_cpu_aliases(const at::Tensor& self, const at::Tensor& other, c10::DeviceIndex device,
                                 CpuKernel cpu_kernel) {
  // The output is fresh memory, and the CPU kernel checks overlap only between outputs
  // and inputs: the inputs need no shared CPU storage, so no CpuAliasSet.
  at::Tensor cpu_self = cpu_alias(self);
  at::Tensor cpu_other = other.device().type() != kNpu ? other
                         : other.unsafeGetTensorImpl() == self.unsafeGetTensorImpl() ? cpu_self
                                                                                       : cpu_alias(other);
  CurrentDeviceScope device_scope(device);
  CpuAllocationRedirect redirect(device);
  return adopt_cpu_result(cpu_kernel(cpu_self, cpu_other), device);
}

// `self (op)= other` with the in-place CPU kernel on CPU aliases. One CpuAliasSet gives
// views of one storage one CPU storage, so the CPU kernel's overlap checks see what they
// see on cpu.
template <typename CpuKernel>
void binary_on_cpu_aliases_(const at::Tensor& self, const at::Tensor& other, c10::DeviceIndex device,
                            CpuKernel cpu_kernel) {
  CpuAliasSet aliases;
  at::Tensor cpu_self = aliases.alias(self);
  at::Tensor cpu_other = cpu_side(other, aliases);
  CurrentDeviceScope device_scope(device);
  CpuAllocationRedirect redirect(device);
  cpu_kernel(cpu_self, cpu_other);  // an in-place kernel never resizes self: a mismatch raises
}

// One binary operator: its structured kernel (`Structured`, whose impl takes the trailing
// `extra` arguments, alpha or none), its CPU kernels for the CPU-alias path, and whether
// its iterator promotes integer inputs to float.
template <typename Structured, bool integer_to_float>
struct BinaryFastPath {
  template <typename CpuKernel, typename... Extra>
  static at::Tensor functional(const c10::OperatorHandle& op, FastPathCounter& counter, const at::Tensor& self,
                               const at::Tensor& other, CpuKernel cpu_kernel, const Extra&... extra) {
    const c10::DeviceIndex device = fast_binary_device(op, self, other);
    if (device < 0) return run_fallback(op, self, other, extra...).toTensor();
    counter.hit();
    at::Tensor converted;
    const at::Tensor* operand = iterator_operand(self, other, integer_to_float, converted);
    if (operand == nullptr) return binary_on_cpu_aliases(self, other, device, cpu_kernel);
    CurrentDeviceScope device_scope(device);  // the output's memory comes from this device
    NpuFunctional<Structured> kernel;
    kernel.meta(self, *operand, extra...);
    kernel.impl(self, *operand, extra..., kernel.output);
    return std::move(kernel.output);
  }

  template <typename CpuKernel, typename... Extra>
  static void in_place(const c10::OperatorHandle& op, FastPathCounter& counter, const at::Tensor& self,
                       const at::Tensor& other, CpuKernel cpu_kernel, const Extra&... extra) {
    const c10::DeviceIndex device = fast_binary_device(op, self, other);
    if (device < 0) {
      run_fallback(op, self, other, extra...);
      return;
    }
    counter.hit();
    at::Tensor converted;
    const at::Tensor* operand = iterator_operand(self, other, integer_to_float, converted);
    if (operand == nullptr) return binary_on_cpu_aliases_(self, other, device, cpu_kernel);
    // Nothing is allocated: the iterator writes self, and TensorIterator's overlap checks
    // compare the npu tensors' own storages.
    NpuInPlace<Structured> kernel(self);
    kernel.meta(self, *operand, extra...);
    kernel.impl(self, *operand, extra..., self);
  }
};

// One unary operator: its structured kernel (`Structured`, whose meta and impl take the
// trailing `extra` arguments, pow's exponent or none). The float operators' iterators
// promote integer and bool inputs to the default float dtype, a converting copy
// TensorIterator makes only on cpu: those calls (results or cpu's errors) take the
// fallback. Everything else the iterator needs is on the npu tensor itself: pow's meta
// function converts the base to the result dtype (an npu `to`), and its impl fills or
// copies (npu `fill_`, `copy_`) for the exponents 0 and 1.
template <typename Structured, bool integer_to_float>
struct UnaryFastPath {
  static c10::DeviceIndex device(const at::Tensor& self) {
    if (integer_to_float && c10::isIntegralType(self.scalar_type(), /*includeBool=*/true)) return -1;
    return fast_unary_device(self);
  }

  template <typename... Extra>
  static at::Tensor functional(const c10::OperatorHandle& op, FastPathCounter& counter, const at::Tensor& self,
                               const Extra&... extra) {
    const c10::DeviceIndex on = device(self);
    if (on < 0) return run_fallback(op, self, extra...).toTensor();
    counter.hit();
    CurrentDeviceScope device_scope(on);
    NpuFunctional<Structured> kernel;
    kernel.meta(self, extra...);
    kernel.impl(self, extra..., kernel.output);
    return std::move(kernel.output);
  }

  template <typename... Extra>
  static void in_place(const c10::OperatorHandle& op, FastPathCounter& counter, const at::Tensor& self,
                       const Extra&... extra) {
    const c10::DeviceIndex on = device(self);
    if (on < 0) {
      run_fallback(op, self, extra...);
      return;
    }
    counter.hit();
    CurrentDeviceScope device_scope(on);  // pow's conversion of the base allocates
    NpuInPlace<Structured> kernel(self);
    kernel.meta(self, extra...);
    kernel.impl(self, extra..., self);
  }
};

}  // namespace torch_npu
