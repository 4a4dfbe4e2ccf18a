// The fused attention kernels shared by torch_npu.npu_fusion_attention (and its inference
// variants) and by scaled_dot_product_attention on npu.
//
// Both front ends reduce their arguments to one canonical problem: query [B, N1, Sq, D],
// key [B, N2, Skv, D], value [B, N2, Skv, Dv] as strided views (any layout), an optional
// additive bias and boolean mask broadcast to [B, N1, Sq, Skv], a band of allowed
// key positions per query row, and optionally variable-length segments packed along S.
// The kernels are the internal operators npu::_fused_attention_forward / _backward (CPU
// kernels, reached on npu through the runtime's fallback like every other CPU kernel, so
// device memory, graph capture and device checks behave as for any op).
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>
#include <vector>

namespace torch_npu {

// A band bound meaning "unbounded" (the Ascend default 2147483647 is also unbounded for
// any sequence this runtime can hold).
constexpr int64_t kUnboundedBand = int64_t(1) << 62;

// Which rows of q and k/v form each sequence. Not packed: one sequence per batch entry b,
// rows [q_starts[b], q_starts[b] + q_lens[b]) (defaults: 0 and all of S); mask and bias are
// indexed by absolute position. Packed: batch 1, sequences laid one after another along S
// with the given lengths; mask and bias are indexed relative to each sequence.
struct SequenceSpec {
  at::OptionalIntArrayRef q_starts, q_lens, kv_starts, kv_lens;
  bool packed = false;
};

// Calls npu::_fused_attention_forward. Returns (out, stat0, stat1):
// stats_width > 0: stat0 = row max, stat1 = row sum of exp(s - max), both [B, N1, Sq, W];
// stats_width == 0: stat0 = logsumexp [B, N1, Sq], stat1 empty.
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_attention_forward(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& mask, const std::optional<at::Tensor>& sink,
    const SequenceSpec& seqs, double scale, double bias_scale,
    double keep_prob, int64_t seed, int64_t offset, int64_t band_lo, int64_t band_hi, bool band_bottom_right,
    int64_t stats_width, at::IntArrayRef out_perm, at::IntArrayRef stats_perm);

// Calls npu::_fused_attention_backward. Returns (dq, dk, dv, dbias [B, N1, Sq, Skv] float or
// empty, dsink [N1] float or empty).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& stat0, const std::optional<at::Tensor>& stat1, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& mask, const std::optional<at::Tensor>& sink,
    const SequenceSpec& seqs, double scale, double bias_scale,
    double keep_prob, int64_t seed, int64_t offset, int64_t band_lo, int64_t band_hi, bool band_bottom_right,
    bool bias_grad, at::IntArrayRef dq_perm, at::IntArrayRef dk_perm, at::IntArrayRef dv_perm);

// The physical order of the dimensions of `t` (outermost first), from its strides.
std::vector<int64_t> physical_order(const at::Tensor& t);

// Draws a dropout seed from the default generator of `device` (npu or cpu).
int64_t draw_dropout_seed(c10::Device device);

}  // namespace torch_npu
