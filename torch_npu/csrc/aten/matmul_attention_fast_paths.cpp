// Unboxed npu kernels (fast_path.h) for the matrix products and the CPU flash attention:
// the operators Inductor leaves outside its fused kernels (`extern_kernels.addmm(...,
// out=buf)`, `mm`, `bmm`, `baddbmm`, `_scaled_dot_product_flash_attention_for_cpu`) and
// that eager `nn.Linear`, `torch.matmul` and `F.scaled_dot_product_attention` run. Each
// calls the CPU kernel the fallback's redispatch reaches, so results are the same.
#include "torch_npu/csrc/aten/fast_path.h"

#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_cpu_dispatch.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/baddbmm_cpu_dispatch.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>
#include <torch/library.h>

#include <tuple>

namespace torch_npu {
namespace {

at::Tensor npu_mm(const at::Tensor& self, const at::Tensor& mat2) {
  static FastOperator f("aten::mm", "");
  return fast_functional(f.op, f.counter, [](const auto&... a) { return at::cpu::mm(a...); }, self, mat2);
}

at::Tensor& npu_mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  static FastOperator f("aten::mm", "out");
  return fast_out(f.op, f.counter, [](auto&&... a) { at::cpu::mm_outf(a...); }, out, self, mat2);
}

at::Tensor npu_bmm(const at::Tensor& self, const at::Tensor& mat2) {
  static FastOperator f("aten::bmm", "");
  return fast_functional(f.op, f.counter, [](const auto&... a) { return at::cpu::bmm(a...); }, self, mat2);
}

at::Tensor& npu_bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  static FastOperator f("aten::bmm", "out");
  return fast_out(f.op, f.counter, [](auto&&... a) { at::cpu::bmm_outf(a...); }, out, self, mat2);
}

at::Tensor npu_addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                     const at::Scalar& alpha) {
  static FastOperator f("aten::addmm", "");
  return fast_functional(f.op, f.counter, [](const auto&... a) { return at::cpu::addmm(a...); }, self, mat1, mat2,
                         beta, alpha);
}

at::Tensor& npu_addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                          const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  static FastOperator f("aten::addmm", "out");
  return fast_out(f.op, f.counter, [](auto&&... a) { at::cpu::addmm_outf(a...); }, out, self, mat1, mat2, beta,
                  alpha);
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
  FastCall call;
  if (!call.admit(query, key, value, attn_mask)) {
    torch::jit::Stack stack{query, key, value, dropout_p, is_causal, attn_mask, scale};
    npu_fallback(f.op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &stack);
    return {stack[0].toTensor(), stack[1].toTensor()};
  }
  f.counter.hit();
  auto [output, logsumexp] = at::cpu::_scaled_dot_product_flash_attention_for_cpu(
      call.cpu(query), call.cpu(key), call.cpu(value), dropout_p, is_causal, call.cpu(attn_mask), scale);
  return {call.npu(output), call.npu(logsumexp)};
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
