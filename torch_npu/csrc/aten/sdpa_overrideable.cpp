// scaled_dot_product_attention on npu: cpu's choice, cpu's kernels.
//
// ATen picks the SDPA backend of a device through the C++ dispatch stub
// _fused_sdp_choice_stub (a Python kernel for aten::_fused_sdp_choice changes only direct
// calls of that op, not what SDPA does). npu promises cpu's numbers bit for bit, so the npu
// answer is cpu's own choice on the same tensors: `flash_attention` makes ATen call
// _scaled_dot_product_flash_attention_for_cpu (and its backward), which the operator
// fallback runs with cpu's kernel on the npu memory; `math` runs cpu's composite, op by op.
// The same blocking, accumulation order and errors as cpu follow from running cpu's code.
//
// The runtime's own fused kernels (the ones npu_fusion_attention runs) stay reachable as
// the `overrideable` backend for a user who asks for it alone
// (torch.nn.attention.sdpa_kernel(SDPBackend.OVERRIDEABLE)), as a CUDA user can ask for one
// fused kernel; for that backend this file implements
// _scaled_dot_product_fused_attention_overrideable and its backward.
#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_ops.h>
#include <torch/library.h>

#include <cmath>

#include "torch_npu/csrc/aten/fused_attention.h"

namespace torch_npu {
namespace {

bool fused_dtype(at::ScalarType t) { return t == at::kFloat || t == at::kHalf || t == at::kBFloat16; }

bool fused_kernels_serve(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, bool enable_gqa) {
  if (query.is_nested() || key.is_nested() || value.is_nested()) return false;
  if (query.dim() != 4 && query.dim() != 3) return false;
  if (key.dim() != query.dim() || value.dim() != query.dim()) return false;
  if (!fused_dtype(query.scalar_type()) || key.scalar_type() != query.scalar_type() ||
      value.scalar_type() != query.scalar_type()) {
    return false;
  }
  const int64_t hq = query.size(-3), hkv = key.size(-3);
  if (value.size(-3) != hkv || hkv == 0) return false;
  if (hq != hkv && (!enable_gqa || hq % hkv != 0)) return false;
  if (query.dim() == 4 && (key.size(0) != query.size(0) || value.size(0) != query.size(0))) return false;
  if (attn_mask.has_value() && attn_mask->defined() && attn_mask->dim() > 4) return false;
  return true;
}

int64_t npu_fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                             const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                             std::optional<double> scale, bool enable_gqa) {
  const auto& ctx = at::globalContext();
  // Only the overrideable backend enabled: the user asks for the npu's fused kernels.
  if (!ctx.userEnabledMathSDP() && !ctx.userEnabledFlashSDP() && ctx.userEnabledOverrideableSDP() &&
      fused_kernels_serve(query, key, value, attn_mask, enable_gqa)) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  // cpu's decision (flash or math, with cpu's priority order, constraints and errors).
  // (cpu's stub entry is not exported; its op's cpu kernel is the same function, and it
  // reads only the tensors' metadata, so it answers for npu and fake npu tensors alike.)
  return at::_ops::_fused_sdp_choice::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), query, key, value,
                                                 attn_mask, dropout_p, is_causal, scale, enable_gqa);
}

at::Tensor as_4d(const at::Tensor& t) {
  at::Tensor r = t;
  while (r.dim() < 4) r = r.unsqueeze(0);
  return r;
}

double resolved_scale(const at::Tensor& query, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
}

at::Tensor cpu_long_scalar(int64_t v) { return at::scalar_tensor(v, at::TensorOptions().dtype(at::kLong)); }

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
npu_sdpa_overrideable(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                      const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                      bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(!return_debug_mask, "scaled_dot_product_attention on npu: return_debug_mask is not supported");
  TORCH_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, "scaled_dot_product_attention: dropout_p must be in [0, 1), got ",
              dropout_p);
  const bool three_d = query.dim() == 3;
  at::Tensor q = as_4d(query), k = as_4d(key), v = as_4d(value);
  std::optional<at::Tensor> bias;
  if (attn_bias.has_value() && attn_bias->defined()) bias = as_4d(*attn_bias);
  const int64_t seed = dropout_p > 0.0 ? draw_dropout_seed(query.device()) : 0;
  std::vector<int64_t> out_perm = physical_order(q);
  auto [out, lse, unused] = fused_attention_forward(
      q, k, v, bias, std::nullopt, std::nullopt, SequenceSpec{}, resolved_scale(query, scale), 1.0,
      1.0 - dropout_p, seed, 0, -kUnboundedBand, is_causal ? 0 : kUnboundedBand, false, 0, out_perm, {0, 1, 2, 3});
  if (three_d) out = out.squeeze(0);
  return {out,
          lse,
          at::Tensor(),
          at::Tensor(),
          c10::SymInt(query.size(-2)),
          c10::SymInt(key.size(-2)),
          cpu_long_scalar(seed),
          cpu_long_scalar(0),
          at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_sdpa_overrideable_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/, const at::Tensor& /*cum_seq_k*/,
    c10::SymInt /*max_q*/, c10::SymInt /*max_k*/, double dropout_p, bool is_causal, const at::Tensor& philox_seed,
    const at::Tensor& philox_offset, std::optional<double> scale) {
  const bool three_d = query.dim() == 3;
  at::Tensor q = as_4d(query), k = as_4d(key), v = as_4d(value);
  std::optional<at::Tensor> bias;
  if (attn_bias.defined()) bias = as_4d(attn_bias);
  const int64_t seed = philox_seed.defined() && dropout_p > 0.0 ? philox_seed.item<int64_t>() : 0;
  const int64_t offset = philox_offset.defined() && dropout_p > 0.0 ? philox_offset.item<int64_t>() : 0;
  auto [dq, dk, dv, dbias, unused] = fused_attention_backward(
      as_4d(grad_out), q, k, v, as_4d(out), logsumexp, std::nullopt, bias, std::nullopt, std::nullopt, SequenceSpec{},
      resolved_scale(query, scale), 1.0, 1.0 - dropout_p, seed, offset, -kUnboundedBand,
      is_causal ? 0 : kUnboundedBand, false, bias.has_value() && grad_input_mask[3], physical_order(q),
      physical_order(k), physical_order(v));
  if (three_d) {
    dq = dq.squeeze(0);
    dk = dk.squeeze(0);
    dv = dv.squeeze(0);
  }
  at::Tensor grad_bias;
  if (bias.has_value() && grad_input_mask[3]) {
    grad_bias = dbias.sum_to_size(bias->sizes()).view(attn_bias.sizes()).to(attn_bias.scalar_type());
  }
  return {grad_input_mask[0] ? dq : at::Tensor(), grad_input_mask[1] ? dk : at::Tensor(),
          grad_input_mask[2] ? dv : at::Tensor(), grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Direct calls of the choice op answer what SDPA itself does on npu.
  m.impl("_fused_sdp_choice", TORCH_FN(npu_fused_sdp_choice));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(npu_sdpa_overrideable));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(npu_sdpa_overrideable_backward));
}

}  // namespace torch_npu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_npu::npu_fused_sdp_choice)
}  // namespace at::native
