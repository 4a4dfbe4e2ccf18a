// Unboxed npu kernels of fill_, zero_ and copy_ between npu tensors of one device: the
// writes behind zeros, scalar_tensor, clone, `to(dtype)` and the gradient buffers autograd
// makes, which otherwise take the operator fallback (fill_, zero_) or the copy between
// devices (copy_ -> _copy_from).
//
// fill_ and zero_ run ATen's CPU kernels (Fill.cpp) on the npu tensor itself, including
// their choices for host memory: a 1-element fill writes the value directly (for the
// dtypes whose conversion is known to be `Scalar::to`; the others fill the CPU alias) and
// a small dense zero_ is a memset, as on cpu; the rest goes through fill_stub's npu entry,
// the CPU loop. copy_ runs cpu's copy_ on CPU aliases
// of the two tensors (one CpuAliasSet: cpu's overlap rules see one storage), which keeps
// every choice cpu's copy makes (its transposed-matrix and half<->float paths). Every call
// the fast paths may not serve (fast_path.h) takes the path it took before.

// First: it sets up DispatchStub.h for calling the stubs' CPU kernels.
#include "torch_npu/csrc/aten/iterator_on_npu.h"

#include "torch_npu/csrc/aten/cpu_aliases.h"
#include "torch_npu/csrc/aten/fallback.h"
#include "torch_npu/csrc/aten/fast_path.h"

#include <ATen/TensorIterator.h>
#include <ATen/native/Fill.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/fill_native.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <cstring>

namespace torch_npu {
namespace {

void fill_on_host(at::TensorIterator& iter, const c10::Scalar& value) {
  at::native::fill_stub(c10::DeviceType::CPU, iter, value);
}

}  // namespace
}  // namespace torch_npu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(fill_stub, &torch_npu::fill_on_host)
}  // namespace at::native

namespace torch_npu {
namespace {

// fill_out of Fill.cpp with its host-memory branch: one element is written directly.
// For float, double, int64, int32 and bool that store is `Scalar::to` of the value; for
// the other dtypes cpu's conversion differs by dtype (half and bfloat16 convert through
// double, unchecked), so cpu's fill runs on the CPU alias of the element.
at::Tensor& fill_on_host_memory(at::Tensor& self, const c10::Scalar& value) {
  if (self.numel() != 1) return at::native::fill_(self, value);
  switch (self.scalar_type()) {
    case at::kFloat: *static_cast<float*>(self.data_ptr()) = value.to<float>(); break;
    case at::kDouble: *static_cast<double*>(self.data_ptr()) = value.to<double>(); break;
    case at::kLong: *static_cast<int64_t*>(self.data_ptr()) = value.to<int64_t>(); break;
    case at::kInt: *static_cast<int32_t*>(self.data_ptr()) = value.to<int32_t>(); break;
    case at::kBool: *static_cast<bool*>(self.data_ptr()) = value.to<bool>(); break;
    default: cpu_alias(self).fill_(value);
  }
  return self;
}

at::Tensor& npu_fill_scalar_(at::Tensor& self, const at::Scalar& value) {
  static FastOperator fast("aten::fill_", "Scalar");
  c10::DeviceIndex device;
  if (!admit_npu_tensors(device, self)) {
    run_fallback(fast.op, self, value);
    return self;
  }
  fast.counter.hit();
  return fill_on_host_memory(self, value);
}

// fill_(Tensor) of Fill.cpp: a value of the same device is copied (broadcast), read with
// item() only from another device; a cpu value takes the fallback and its argument rule.
at::Tensor& npu_fill_tensor_(at::Tensor& self, const at::Tensor& value) {
  static FastOperator fast("aten::fill_", "Tensor");
  c10::DeviceIndex device;
  if (!admit_npu_tensors(device, self, value)) {
    run_fallback(fast.op, self, value);
    return self;
  }
  fast.counter.hit();
  CurrentDeviceScope device_scope(device);  // a value that aliases self is cloned first
  return at::native::fill_(self, value);
}

// zero_ of Fill.cpp with its host-memory branch: a small dense tensor is a memset.
at::Tensor& npu_zero_(at::Tensor& self) {
  static FastOperator fast("aten::zero_", "");
  c10::DeviceIndex device;
  if (!admit_npu_tensors(device, self)) {
    run_fallback(fast.op, self);
    return self;
  }
  fast.counter.hit();
  const int64_t elements = c10::multiply_integers(self.sizes());
  if (self.is_non_overlapping_and_dense() && elements < at::internal::GRAIN_SIZE) {
    void* data = self.data_ptr();
    if (data == nullptr) return self.fill_(0);
    const int64_t bytes = elements * static_cast<int64_t>(self.dtype().itemsize());
    if (bytes > 0) std::memset(data, 0, static_cast<size_t>(bytes));
    return self;
  }
  return self.fill_(0);
}

// copy_ between two npu tensors of one device: cpu's copy_ on their CPU aliases. Any other
// copy (another device, the host, an observed or captured one) takes the generic copy_,
// which hands it to _copy_from.
at::Tensor& npu_copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  static FastPathCounter counter("aten::copy_");
  c10::DeviceIndex device;
  if (!admit_npu_tensors(device, self, src)) return at::native::copy_(self, src, non_blocking);
  counter.hit();
  CpuAliasSet aliases;
  at::Tensor cpu_self = aliases.alias(self);
  at::Tensor cpu_src = aliases.alias(src);
  cpu_self.copy_(cpu_src, non_blocking);  // copies never allocate: no device scope needed
  copy_backend_meta_if_absent(src, self);
  return self;
}

}  // namespace

void register_fill_copy_fast_paths(torch::Library& m) {
  m.impl("fill_.Scalar", TORCH_FN(npu_fill_scalar_));
  m.impl("fill_.Tensor", TORCH_FN(npu_fill_tensor_));
  m.impl("zero_", TORCH_FN(npu_zero_));
  m.impl("copy_", TORCH_FN(npu_copy_));
}

}  // namespace torch_npu
