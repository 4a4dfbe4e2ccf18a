// Unboxed npu kernels (fast_path.h) for the matrix products and the CPU flash attention:
// the operators Inductor leaves outside its fused kernels (`extern_kernels.addmm(...,
// out=buf)`, `mm`, `bmm`, `baddbmm`, `_scaled_dot_product_flash_attention_for_cpu`) and
// that eager `nn.Linear`, `torch.matmul` and `F.scaled_dot_product_attention` run. Each
// runs the CPU implementation the fallback's redispatch reaches, so results are the same.
//
// mm, addmm, bmm and the flash attention run it on the npu tensors themselves
// (structured_on_npu.h): their CPU implementations reach BLAS (cpublas, kCPU stubs) and
// the attention kernel through data pointers and allocate from the operands' options.
// bmm and baddbmm may instead hand the operands to oneDNN as CPU tensors (mkldnn_matmul,
// which refuses any other device): bmm in the dtypes oneDNN may take stays on the CPU
// aliases, and so does baddbmm.
#include "torch_npu/csrc/aten/cpu_dispatch_stub.h"  // first: see there

#include "torch_npu/csrc/aten/structured_on_npu.h"

#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Copy.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_native.h>
#include <ATen/ops/addmm_native.h>
#include <ATen/ops/baddbmm_cpu_dispatch.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/bmm_native.h>
#include <ATen/ops/mm_native.h>
#include <torch/library.h>

#include <tuple>

namespace torch_npu {
namespace {

// `dst.copy_(src)` for npu tensors of one dtype, as copy_'s CPU implementation runs it:
// the same early exit, the same iterator (with its overlap checks) and the same CPU loop.
// (An npu copy_ takes CPU aliases of both tensors.)
void copy_on_host(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.is_same(src)) return;
  if (dst.is_alias_of(src) && dst.storage_offset() == src.storage_offset() && dst.strides().equals(src.strides()) &&
      dst.sizes().equals(src.sizes()) && dst.is_conj() == src.is_conj() && dst.is_neg() == src.is_neg()) {
    return;
  }
  auto iter = at::TensorIteratorConfig()
                  .add_output(dst)
                  .add_const_input(src)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .check_all_same_device(false)
                  .build();
  if (iter.numel() == 0) return;
  at::native::copy_stub(c10::DeviceType::CPU, iter, /*non_blocking=*/false);
}

// addmm's impl on `result` (the new output or `out`). Its first step copies the broadcast
// `self` into `result` when beta is not zero: that copy runs here on the npu tensors, and
// the impl is then handed `result` as self (as for addmm_), which it recognises and does
// not copy again. The expansion raises what the impl's raises, before anything is written.
template <typename Kernel>
void addmm_into(Kernel& kernel, const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                const at::Scalar& beta, const at::Scalar& alpha, const at::Tensor& result) {
  if (beta.toComplexDouble() != 0.0 && result.numel() != 0) {
    c10::MaybeOwned<at::Tensor> expanded = at::expand_size(self, {mat1.sizes()[0], mat2.sizes()[1]}, "addmm_out");
    if (!expanded->is_same(result)) {
      copy_on_host(result, *expanded);
      kernel.impl(result, mat1, mat2, beta, alpha, result);
      return;
    }
  }
  kernel.impl(self, mat1, mat2, beta, alpha, result);
}

// mm or bmm (`Structured`, their structured CPU kernel) on the npu tensors; the out= form
// writes `out`, resized as the CPU out= wrapper resizes it.
template <typename Structured>
at::Tensor product_on_npu(FastOperator& f, const at::Tensor& self, const at::Tensor& mat2) {
  const c10::DeviceIndex device = direct_call_device(self, mat2);
  if (device < 0) return run_fallback(f.op, self, mat2).toTensor();
  f.counter.hit();
  CurrentDeviceScope scope(device);
  NpuStructuredFunctional<Structured> kernel;
  kernel.meta(self, mat2);
  kernel.impl(self, mat2, kernel.outputs[0]);
  return std::move(kernel.outputs[0]);
}

template <typename Structured>
at::Tensor& product_out_on_npu(FastOperator& f, const at::Tensor& self, const at::Tensor& mat2,
                               at::Tensor& out) {
  const c10::DeviceIndex device = direct_call_device(self, mat2, out);
  if (device < 0) {
    run_fallback(f.op, self, mat2, out);
    return out;
  }
  f.counter.hit();
  CurrentDeviceScope scope(device);
  NpuStructuredOut<Structured> kernel(out);
  kernel.meta(self, mat2);
  kernel.impl(self, mat2, kernel.maybe_get_output(0));
  kernel.finish();
  return out;
}

at::Tensor npu_mm(const at::Tensor& self, const at::Tensor& mat2) {
  static FastOperator f("aten::mm", "");
  return product_on_npu<at::native::structured_mm_out_cpu>(f, self, mat2);
}

at::Tensor& npu_mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  static FastOperator f("aten::mm", "out");
  return product_out_on_npu<at::native::structured_mm_out_cpu>(f, self, mat2, out);
}

// Whether bmm's CPU implementation may hand these operands to oneDNN (use_mkldnn_matmul:
// reduced-precision dtypes, or float32 under a reduced matmul precision).
bool onednn_may_take_bmm(const at::Tensor& batch1) {
  switch (batch1.scalar_type()) {
    case at::kBFloat16:
    case at::kHalf:
      return true;
    case at::kFloat: {
      const at::Float32Precision precision =
          at::globalContext().float32Precision(at::Float32Backend::MKLDNN, at::Float32Op::MATMUL);
      return precision == at::Float32Precision::BF16 || precision == at::Float32Precision::TF32;
    }
    default:
      return false;
  }
}

at::Tensor npu_bmm(const at::Tensor& self, const at::Tensor& mat2) {
  static FastOperator f("aten::bmm", "");
  if (onednn_may_take_bmm(self)) {
    return fast_functional(f.op, f.counter, [](const auto&... a) { return at::cpu::bmm(a...); }, self, mat2);
  }
  return product_on_npu<at::native::structured_bmm_out_cpu>(f, self, mat2);
}

at::Tensor& npu_bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  static FastOperator f("aten::bmm", "out");
  if (onednn_may_take_bmm(self)) {
    return fast_out(f.op, f.counter, [](auto&&... a) { at::cpu::bmm_outf(a...); }, out, self, mat2);
  }
  return product_out_on_npu<at::native::structured_bmm_out_cpu>(f, self, mat2, out);
}

at::Tensor npu_addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                     const at::Scalar& alpha) {
  static FastOperator f("aten::addmm", "");
  const c10::DeviceIndex device = direct_call_device(self, mat1, mat2);
  if (device < 0) return run_fallback(f.op, self, mat1, mat2, beta, alpha).toTensor();
  f.counter.hit();
  CurrentDeviceScope scope(device);
  NpuStructuredFunctional<at::native::structured_addmm_out_cpu> kernel;
  kernel.meta(self, mat1, mat2, beta, alpha);
  addmm_into(kernel, self, mat1, mat2, beta, alpha, kernel.outputs[0]);
  return std::move(kernel.outputs[0]);
}

at::Tensor& npu_addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                          const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  static FastOperator f("aten::addmm", "out");
  const c10::DeviceIndex device = direct_call_device(self, mat1, mat2, out);
  if (device < 0) {
    run_fallback(f.op, self, mat1, mat2, beta, alpha, out);
    return out;
  }
  f.counter.hit();
  CurrentDeviceScope scope(device);
  NpuStructuredOut<at::native::structured_addmm_out_cpu> kernel(out);
  kernel.meta(self, mat1, mat2, beta, alpha);
  addmm_into(kernel, self, mat1, mat2, beta, alpha, kernel.maybe_get_output(0));
  kernel.finish();
  return out;
}

at::Tensor npu_baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                       const at::Scalar& beta, const at::Scalar& alpha) {
  static FastOperator f("aten::baddbmm", "");
  return fast_functional(f.op, f.counter, [](const auto&... a) { return at::cpu::baddbmm(a...); }, self, batch1,
                         batch2, beta, alpha);
}

at::Tensor& npu_baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                            const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  static FastOperator f("aten::baddbmm", "out");
  return fast_out(f.op, f.counter, [](auto&&... a) { at::cpu::baddbmm_outf(a...); }, out, self, batch1, batch2,
                  beta, alpha);
}

std::tuple<at::Tensor, at::Tensor> npu_flash_attention_for_cpu(const at::Tensor& query, const at::Tensor& key,
                                                              const at::Tensor& value, double dropout_p,
                                                              bool is_causal,
                                                              const std::optional<at::Tensor>& attn_mask,
                                                              std::optional<double> scale) {
  static FastOperator f("aten::_scaled_dot_product_flash_attention_for_cpu", "");
  const c10::DeviceIndex device = direct_call_device(query, key, value, attn_mask);
  if (device < 0) {
    torch::jit::Stack stack{query, key, value, dropout_p, is_causal, attn_mask, scale};
    npu_fallback(f.op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &stack);
    return {stack[0].toTensor(), stack[1].toTensor()};
  }
  f.counter.hit();
  CurrentDeviceScope scope(device);
  return at::native::_scaled_dot_product_flash_attention_cpu(query, key, value, dropout_p, is_causal, attn_mask,
                                                            scale);
}

}  // namespace

void register_matmul_attention_fast_paths(torch::Library& m) {
  m.impl("mm", TORCH_FN(npu_mm));
  m.impl("mm.out", TORCH_FN(npu_mm_out));
  m.impl("bmm", TORCH_FN(npu_bmm));
  m.impl("bmm.out", TORCH_FN(npu_bmm_out));
  m.impl("addmm", TORCH_FN(npu_addmm));
  m.impl("addmm.out", TORCH_FN(npu_addmm_out));
  m.impl("baddbmm", TORCH_FN(npu_baddbmm));
  m.impl("baddbmm.out", TORCH_FN(npu_baddbmm_out));
  m.impl("_scaled_dot_product_flash_attention_for_cpu", TORCH_FN(npu_flash_attention_for_cpu));
}

}  // namespace torch_npu
