// Unboxed npu kernels that call an operator's CPU kernel directly.
//
// The operator fallback (kernels.cpp) serves every operator: it boxes the arguments, walks
// the schema, announces the work to the profiler and the stream sanitizer, records it when
// a graph is capturing, widens the dtypes CUDA has and cpu lacks, and redispatches to the
// CPU kernel. For the operators a model runs most, a kernel of its own calls the same CPU
// kernel on the same CPU aliases when none of that can make a difference: no observer
// watching, no capture underway on this thread's stream, plain strided tensors of one npu
// device (no cpu tensor, no zero tensor, no dtype that needs widening), not a bad fork.
// Every other call goes to the fallback, so both paths give the same results and errors.
#pragma once

#include "torch_npu/csrc/aten/cpu_aliases.h"
#include "torch_npu/csrc/aten/fallback.h"
#include "torch_npu/csrc/runtime/allocator.h"
#include "torch_npu/csrc/runtime/device.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch_npu {

// The calls a fast path served, by operator (`torch_npu._C._fast_path_counts()`): tests
// tell from it which path ran. One relaxed atomic add per call.
class FastPathCounter {
 public:
  explicit FastPathCounter(std::string name);
  void hit() { count_.fetch_add(1, std::memory_order_relaxed); }

 private:
  friend std::vector<std::pair<std::string, int64_t>> fast_path_counts();
  std::string name_;
  std::atomic<int64_t> count_{0};
};
std::vector<std::pair<std::string, int64_t>> fast_path_counts();

// Makes `d` the current device for the scope (the CPU kernel's allocations go to it).
struct CurrentDeviceScope {
  explicit CurrentDeviceScope(c10::DeviceIndex d) : previous(current_device()) {
    if (d != previous) set_current_device(d);
  }
  ~CurrentDeviceScope() {
    if (current_device() != previous) set_current_device(previous);
  }
  c10::DeviceIndex previous;
};

// A plain npu tensor: strided, with memory, in a dtype the CPU kernels compute as is
// (ComplexHalf goes through the fallback's dtype widening).
bool is_plain_npu(const at::Tensor& t);
// False while an observer watches or in a forked child that must not use the device.
bool fast_paths_allowed();

// The handle of an aten operator, looked up once (handles live as long as the dispatcher).
const c10::OperatorHandle& aten_op(const char* name, const char* overload);

// An unboxed kernel's operator handle and call counter ("aten::name.overload"), made once
// per kernel (a function-local static).
struct FastOperator {
  FastOperator(const char* name, const char* overload)
      : op(aten_op(name, overload)), counter(std::string(name) + (*overload ? "." : "") + overload) {}
  const c10::OperatorHandle& op;
  FastPathCounter counter;
};

// Runs `op` through the operator fallback with `args` in schema order; its last output.
template <typename... Args>
c10::IValue run_fallback(const c10::OperatorHandle& op, Args&&... args) {
  torch::jit::Stack stack;
  stack.reserve(sizeof...(Args));
  (stack.emplace_back(std::forward<Args>(args)), ...);
  npu_fallback(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &stack);
  return std::move(stack.back());
}

// An npu tensor over `storage` with the geometry of `geometry` (kernels.cpp).
at::Tensor npu_tensor_over(const c10::Storage& storage, const at::Tensor& geometry);
// Gives the npu tensor `npu` what an out= or in-place CPU kernel did to its alias `cpu`
// (new memory after a resize, new geometry); `updated` lists the npu storages already
// given their new memory (kernels.cpp).
void propagate_resize(const at::Tensor& npu, const at::Tensor& cpu, c10::DeviceIndex device,
                      std::vector<c10::StorageImpl*>& updated);

// One call served by a fast path: admit() checks the arguments (and sets the device and
// the allocation redirect for the CPU kernel), cpu() hands out their CPU aliases, npu()
// and written() bring the CPU kernel's results back.
class FastCall {
 public:
  // True when the fast path may run with these arguments; tensors must be plain npu
  // tensors of one device (undefined ones are allowed), anything else is passed through.
  template <typename... Args>
  bool admit(const Args&... args) {
    if (!fast_paths_allowed()) return false;
    if (!(admit_one(args) && ...)) return false;
    if (device_ < 0) return false;
    // Last: a capture may start on another thread at any time, but only work queued on a
    // capturing stream is recorded, and that is this thread's current stream.
    if (capture_underway()) return false;
    scope_.emplace(device_);
    redirect_.emplace(device_);
    return true;
  }

  at::Tensor cpu(const at::Tensor& t);
  std::optional<at::Tensor> cpu(const std::optional<at::Tensor>& t) {
    return t.has_value() ? std::optional<at::Tensor>(cpu(*t)) : std::nullopt;
  }
  // Arguments that are not tensors go to the CPU kernel as they are.
  template <typename T>
  const T& cpu(const T& value) {
    return value;
  }
  // The npu tensor for a CPU result: the npu argument it aliases, a view of that
  // argument's storage, or a new npu tensor over the result's memory.
  at::Tensor npu(const at::Tensor& cpu_result);
  // After an out= or in-place kernel wrote `cpu_arg`, the alias of the npu `arg`.
  void written(const at::Tensor& arg, const at::Tensor& cpu_arg);

 private:
  bool admit_one(const at::Tensor& t) {
    if (!t.defined()) return true;
    if (!is_plain_npu(t)) return false;
    if (device_ < 0) {
      device_ = t.device().index();
      return true;
    }
    return t.device().index() == device_;
  }
  bool admit_one(const std::optional<at::Tensor>& t) { return !t.has_value() || admit_one(*t); }
  template <typename T>
  bool admit_one(const T&) {
    static_assert(!std::is_same_v<T, at::TensorList> && !std::is_same_v<T, c10::List<at::Tensor>> &&
                      !std::is_same_v<T, c10::List<std::optional<at::Tensor>>>,
                  "tensor lists go through the operator fallback");
    return true;
  }
  static bool capture_underway();

  c10::DeviceIndex device_ = -1;
  CpuAliasSet aliases_;
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 4> npu_to_cpu_;
  std::vector<c10::StorageImpl*> updated_;
  // The npu storages that took over the memory of CPU results, by CPU storage (results
  // that are views of one CPU storage become views of one npu storage).
  c10::SmallVector<std::pair<c10::StorageImpl*, c10::Storage>, 2> adopted_;
  std::optional<CurrentDeviceScope> scope_;
  std::optional<CpuAllocationRedirect> redirect_;
};

// Registers the fast paths of mm, bmm, addmm, baddbmm (functional and out=) and the CPU
// flash attention (matmul_attention_fast_paths.cpp). Called where the generic composites
// are routed to the fallback, before that routing: the functional products also have a
// composite kernel, and the routing leaves alone what already has an npu kernel.
void register_matmul_attention_fast_paths(torch::Library& m);
// The same for layer norm, softmax, gelu, index_select, sum/mean over dims and the backward
// kernels eager transformer training runs (model_op_fast_paths.cpp).
void register_model_op_fast_paths(torch::Library& m);
// Registers the fast paths of add, sub, mul, div and relu, functional and in place
// (elementwise_fast_paths.cpp), called at the same place for the same reason.
void register_elementwise_fast_paths(torch::Library& m);
// The same for the comparisons, where, masked_fill_, logical_not, bitwise and/or,
// maximum/minimum and cos, sin, log, reciprocal, erf (comparison_fast_paths.cpp).
void register_comparison_fast_paths(torch::Library& m);
// The same for fill_, zero_ and copy_ between npu tensors (fill_copy_fast_paths.cpp).
void register_fill_copy_fast_paths(torch::Library& m);
// The same for cat (cat_fast_path.cpp).
void register_cat_fast_path(torch::Library& m);

// An operator returning a new tensor: `cpu_kernel` (its CPU kernel, arguments in schema
// order) on the CPU aliases of `args` when the fast path may serve them, else the fallback.
template <typename CpuKernel, typename... Args>
at::Tensor fast_functional(const c10::OperatorHandle& op, FastPathCounter& counter, CpuKernel cpu_kernel,
                           const Args&... args) {
  FastCall call;
  if (!call.admit(args...)) return run_fallback(op, args...).toTensor();
  counter.hit();
  return call.npu(cpu_kernel(call.cpu(args)...));
}

// The out= variant: `cpu_kernel(args..., out)` writes the CPU alias of `out`, whose
// resize (new memory, new geometry) `out` then takes over.
template <typename CpuKernel, typename... Args>
at::Tensor& fast_out(const c10::OperatorHandle& op, FastPathCounter& counter, CpuKernel cpu_kernel, at::Tensor& out,
                     const Args&... args) {
  FastCall call;
  if (!call.admit(args..., out)) {
    run_fallback(op, args..., out);
    return out;
  }
  counter.hit();
  at::Tensor cpu_out = call.cpu(out);
  cpu_kernel(call.cpu(args)..., cpu_out);
  call.written(out, cpu_out);
  return out;
}

}  // namespace torch_npu
