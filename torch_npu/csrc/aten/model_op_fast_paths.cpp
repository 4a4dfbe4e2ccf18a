// Unboxed npu kernels (fast_path.h) for the operators eager transformer models run most
// after the matrix products: layer norm, softmax and log-softmax, gelu, embedding lookup,
// the reductions of their gradients, and the backward kernels of these and of the CPU
// flash attention. Through the boxed fallback each costs ~+0.7–1.7 µs a call over cpu;
// here the same CPU implementation runs, so results are the same, and every call the fast
// path does not admit (an observer watching, a capture underway, mixed devices, a dtype the
// fallback widens) still takes the fallback.
//
// Layer norm and the softmax family run their CPU implementations on the npu tensors
// themselves (structured_on_npu.h): they call their kernels for kCPU through data
// pointers and allocate from the input's options; so does gelu where its implementation
// would not pick oneDNN (which takes CPU tensors only), and tanh's and silu's backward.
// The others run on CPU aliases: index_select's implementation calls a DispatchStub for
// the tensors' device on some paths (a 0-dim index), sum's branches on the iterator's
// device, and the remaining backward kernels' have not been checked for device dependence.
#include "torch_npu/csrc/aten/cpu_dispatch_stub.h"  // first: see there

#include "torch_npu/csrc/aten/structured_on_npu.h"

#include <ATen/native/Activation.h>
#include <ATen/native/BinaryOps.h>

#include <ATen/Context.h>
#include <ATen/ops/_log_softmax_backward_data_native.h>
#include <ATen/ops/_log_softmax_native.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward_cpu_dispatch.h>
#include <ATen/ops/_softmax_backward_data_native.h>
#include <ATen/ops/_softmax_native.h>
#include <ATen/ops/embedding_dense_backward_cpu_dispatch.h>
#include <ATen/ops/gelu_backward_cpu_dispatch.h>
#include <ATen/ops/gelu_backward_native.h>
#include <ATen/ops/gelu_cpu_dispatch.h>
#include <ATen/ops/gelu_native.h>
#include <ATen/ops/index_select_cpu_dispatch.h>
#include <ATen/ops/mean_cpu_dispatch.h>
#include <ATen/ops/native_layer_norm_backward_native.h>
#include <ATen/ops/native_layer_norm_native.h>
#include <ATen/ops/silu_backward_cpu_dispatch.h>
#include <ATen/ops/silu_backward_native.h>
#include <ATen/ops/sum_cpu_dispatch.h>
#include <ATen/ops/tanh_backward_cpu_dispatch.h>
#include <ATen/ops/tanh_backward_native.h>
#include <torch/library.h>

#include <array>
#include <tuple>

namespace torch_npu {
namespace {

using Tensor3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// The fallback's three results of `op` run on `args` (in schema order).
template <typename... Args>
Tensor3 fallback3(const c10::OperatorHandle& op, Args&&... args) {
  torch::jit::Stack stack;
  stack.reserve(sizeof...(Args));
  (stack.emplace_back(std::forward<Args>(args)), ...);
  npu_fallback(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &stack);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
}

Tensor3 npu_of(FastCall& call, const Tensor3& cpu) {
  return {call.npu(std::get<0>(cpu)), call.npu(std::get<1>(cpu)), call.npu(std::get<2>(cpu))};
}

Tensor3 npu_native_layer_norm(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                              const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                              double eps) {
  static FastOperator f("aten::native_layer_norm", "");
  const c10::DeviceIndex device = direct_call_device(input, weight, bias);
  if (device < 0) return fallback3(f.op, input, normalized_shape, weight, bias, eps);
  f.counter.hit();
  CurrentDeviceScope scope(device);
  return at::native::layer_norm_cpu(input, C10_AS_INTARRAYREF_SLOW(normalized_shape), weight, bias, eps);
}

Tensor3 npu_native_layer_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                       c10::SymIntArrayRef normalized_shape, const at::Tensor& mean,
                                       const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
                                       const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  static FastOperator f("aten::native_layer_norm_backward", "");
  const c10::DeviceIndex device = direct_call_device(grad_out, input, mean, rstd, weight, bias);
  if (device < 0) {
    return fallback3(f.op, grad_out, input, normalized_shape, mean, rstd, weight, bias,
                     c10::List<bool>({output_mask[0], output_mask[1], output_mask[2]}));
  }
  f.counter.hit();
  CurrentDeviceScope scope(device);
  return at::native::layer_norm_backward_cpu(grad_out, input, C10_AS_INTARRAYREF_SLOW(normalized_shape), mean, rstd,
                                             weight, bias, output_mask);
}

Tensor3 npu_flash_attention_for_cpu_backward(const at::Tensor& grad_out, const at::Tensor& query,
                                             const at::Tensor& key, const at::Tensor& value, const at::Tensor& out,
                                             const at::Tensor& logsumexp, double dropout_p, bool is_causal,
                                             const std::optional<at::Tensor>& attn_mask,
                                             std::optional<double> scale) {
  static FastOperator f("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "");
  FastCall call;
  if (!call.admit(grad_out, query, key, value, out, logsumexp, attn_mask)) {
    return fallback3(f.op, grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, attn_mask, scale);
  }
  f.counter.hit();
  return npu_of(call, at::cpu::_scaled_dot_product_flash_attention_for_cpu_backward(
                          call.cpu(grad_out), call.cpu(query), call.cpu(key), call.cpu(value), call.cpu(out),
                          call.cpu(logsumexp), dropout_p, is_causal, call.cpu(attn_mask), scale));
}

// A one-output operator whose structured CPU kernel `Structured` runs on the npu tensors.
template <typename Structured, typename... Args>
at::Tensor structured_on_npu(const c10::OperatorHandle& op, FastPathCounter& counter, const at::Tensor& first,
                          const Args&... args) {
  const c10::DeviceIndex device = direct_call_device(first, args...);
  if (device < 0) return run_fallback(op, first, args...).toTensor();
  counter.hit();
  CurrentDeviceScope scope(device);
  NpuStructuredFunctional<Structured> kernel;
  kernel.meta(first, args...);
  kernel.impl(first, args..., kernel.outputs[0]);
  return std::move(kernel.outputs[0]);
}

at::Tensor npu_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  static FastOperator f("aten::_softmax", "");
  return structured_on_npu<at::native::structured_softmax_cpu_out>(f.op, f.counter, self, dim, half_to_float);
}

at::Tensor npu_log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  static FastOperator f("aten::_log_softmax", "");
  return structured_on_npu<at::native::structured_log_softmax_cpu_out>(f.op, f.counter, self, dim, half_to_float);
}

at::Tensor npu_softmax_backward_data(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                     at::ScalarType input_dtype) {
  static FastOperator f("aten::_softmax_backward_data", "");
  return structured_on_npu<at::native::structured_softmax_backward_cpu_out>(f.op, f.counter, grad_output, output, dim,
                                                                        input_dtype);
}

at::Tensor npu_log_softmax_backward_data(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                         at::ScalarType input_dtype) {
  static FastOperator f("aten::_log_softmax_backward_data", "");
  return structured_on_npu<at::native::structured_log_softmax_backward_cpu_out>(f.op, f.counter, grad_output, output,
                                                                            dim, input_dtype);
}

// Whether gelu's CPU implementation (forward and backward) hands `self` to oneDNN, which
// it does for CPU tensors only: the exact gelu of a contiguous float32, bfloat16 or
// float16 tensor of more than one element while oneDNN is enabled (a superset of its
// rule, whose reduced-precision part also depends on the CPU). Those calls stay on CPU
// aliases; every other call runs the CPU implementation, GeluKernel's CPU loop, on the npu
// tensors.
bool onednn_may_take_gelu(const at::Tensor& self, c10::string_view approximate) {
  const at::ScalarType dtype = self.scalar_type();
  return approximate == "none" && at::globalContext().userEnabledMkldnn() && self.numel() > 1 &&
         (dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf) && self.is_contiguous();
}

at::Tensor npu_gelu(const at::Tensor& self, c10::string_view approximate) {
  static FastOperator f("aten::gelu", "");
  if (onednn_may_take_gelu(self, approximate)) {
    return fast_functional(f.op, f.counter, [](const auto&... a) { return at::cpu::gelu(a...); }, self,
                           approximate);
  }
  return structured_on_npu<at::native::structured_gelu_out_cpu>(f.op, f.counter, self, approximate);
}

at::Tensor npu_gelu_backward(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  static FastOperator f("aten::gelu_backward", "");
  // Operands of two dtypes: TensorIterator converts to the common dtype only on cpu.
  if (onednn_may_take_gelu(self, approximate) || grad_output.scalar_type() != self.scalar_type()) {
    return fast_functional(f.op, f.counter, [](const auto&... a) { return at::cpu::gelu_backward(a...); },
                           grad_output, self, approximate);
  }
  return structured_on_npu<at::native::structured_gelu_backward_out_cpu>(f.op, f.counter, grad_output, self,
                                                                     approximate);
}

// tanh's and silu's backward kernels are TensorIterator kernels that call their stub for
// the iterator's device (npu: the entries below). Operands of two dtypes stay on CPU
// aliases: TensorIterator converts them to the common dtype only on cpu.
at::Tensor npu_tanh_backward(const at::Tensor& grad_output, const at::Tensor& output) {
  static FastOperator f("aten::tanh_backward", "");
  if (grad_output.scalar_type() != output.scalar_type()) {
    return fast_functional(f.op, f.counter, [](const auto&... a) { return at::cpu::tanh_backward(a...); },
                           grad_output, output);
  }
  return structured_on_npu<at::native::structured_tanh_backward_out>(f.op, f.counter, grad_output, output);
}

at::Tensor npu_silu_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  static FastOperator f("aten::silu_backward", "");
  if (grad_output.scalar_type() != self.scalar_type()) {
    return fast_functional(f.op, f.counter, [](const auto&... a) { return at::cpu::silu_backward(a...); },
                           grad_output, self);
  }
  return structured_on_npu<at::native::structured_silu_backward_out>(f.op, f.counter, grad_output, self);
}

at::Tensor npu_index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  static FastOperator f("aten::index_select", "");
  return fast_functional(f.op, f.counter, [](const auto&... a) { return at::cpu::index_select(a...); }, self, dim,
                         index);
}

at::Tensor npu_embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices,
                                        c10::SymInt num_weights, c10::SymInt padding_idx, bool scale_grad_by_freq) {
  static FastOperator f("aten::embedding_dense_backward", "");
  return fast_functional(f.op, f.counter,
                         [](const auto&... a) { return at::cpu::embedding_dense_backward_symint(a...); },
                         grad_output, indices, num_weights, padding_idx, scale_grad_by_freq);
}

// sum and mean take a result dtype: complex32 is one the fallback widens (cpu has no
// complex32 sum), so such a call goes to the fallback.
bool widened_result_dtype(std::optional<at::ScalarType> dtype) {
  return dtype.has_value() && *dtype == at::kComplexHalf;
}

at::Tensor npu_sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype) {
  static FastOperator f("aten::sum", "dim_IntList");
  if (widened_result_dtype(dtype)) return run_fallback(f.op, self, dim, keepdim, dtype).toTensor();
  return fast_functional(f.op, f.counter, [](const auto&... a) { return at::cpu::sum(a...); }, self, dim, keepdim,
                         dtype);
}

at::Tensor npu_mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<at::ScalarType> dtype) {
  static FastOperator f("aten::mean", "dim");
  if (widened_result_dtype(dtype)) return run_fallback(f.op, self, dim, keepdim, dtype).toTensor();
  return fast_functional(f.op, f.counter, [](const auto&... a) { return at::cpu::mean(a...); }, self, dim, keepdim,
                         dtype);
}

// The npu entries of the stubs of tanh's and silu's backward: the CPU loops, over the
// same memory.
void tanh_backward_on_host(at::TensorIteratorBase& iter) { at::native::tanh_backward_stub(c10::DeviceType::CPU, iter); }
void silu_backward_on_host(at::TensorIteratorBase& iter) { at::native::silu_backward_stub(c10::DeviceType::CPU, iter); }

}  // namespace
}  // namespace torch_npu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(tanh_backward_stub, &torch_npu::tanh_backward_on_host)
REGISTER_PRIVATEUSE1_DISPATCH(silu_backward_stub, &torch_npu::silu_backward_on_host)
}  // namespace at::native

namespace torch_npu {

void register_model_op_fast_paths(torch::Library& m) {
  m.impl("native_layer_norm", TORCH_FN(npu_native_layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(npu_native_layer_norm_backward));
  m.impl("_scaled_dot_product_flash_attention_for_cpu_backward", TORCH_FN(npu_flash_attention_for_cpu_backward));
  m.impl("_softmax", TORCH_FN(npu_softmax));
  m.impl("_log_softmax", TORCH_FN(npu_log_softmax));
  m.impl("_softmax_backward_data", TORCH_FN(npu_softmax_backward_data));
  m.impl("_log_softmax_backward_data", TORCH_FN(npu_log_softmax_backward_data));
  m.impl("gelu", TORCH_FN(npu_gelu));
  m.impl("gelu_backward", TORCH_FN(npu_gelu_backward));
  m.impl("tanh_backward", TORCH_FN(npu_tanh_backward));
  m.impl("silu_backward", TORCH_FN(npu_silu_backward));
  m.impl("index_select", TORCH_FN(npu_index_select));
  m.impl("embedding_dense_backward", TORCH_FN(npu_embedding_dense_backward));
  m.impl("sum.dim_IntList", TORCH_FN(npu_sum_dim));
  m.impl("mean.dim", TORCH_FN(npu_mean_dim));
}

}  // namespace torch_npu
