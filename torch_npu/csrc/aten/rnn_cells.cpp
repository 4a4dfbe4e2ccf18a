// The fused LSTM and GRU cells, forward and backward, for nn.LSTM/GRU and their cells.
//
// ATen's recurrent layers call the fused cell kernels for every accelerator
// (`_thnn_fused_lstm_cell`, `_thnn_fused_gru_cell` and their backwards) and those exist
// only for CUDA, so npu implements them. They are composed of npu operators with the
// CUDA kernels' formulas and workspace layouts (LSTM: the activated gates [i, f, g, o];
// GRU: [r, z, n, h, hn]), which keeps them recordable by graph capture.

#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

using at::Tensor;

Tensor add_bias(const Tensor& gates, const std::optional<Tensor>& bias) {
  return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

std::tuple<Tensor, Tensor, Tensor> npu_fused_lstm_cell(const Tensor& input_gates, const Tensor& hidden_gates,
                                                       const Tensor& cx, const std::optional<Tensor>& input_bias,
                                                       const std::optional<Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes() && input_gates.dim() == 2 &&
                  input_gates.size(1) == 4 * cx.size(-1),
              "_thnn_fused_lstm_cell: expected input and hidden gates of shape [batch, 4 * hidden], got ",
              input_gates.sizes(), " and ", hidden_gates.sizes(), " for a cell state of shape ", cx.sizes());
  Tensor gates = add_bias(add_bias(input_gates + hidden_gates, input_bias), hidden_bias);
  auto chunks = gates.chunk(4, 1);
  Tensor i = chunks[0].sigmoid();
  Tensor f = chunks[1].sigmoid();
  Tensor g = chunks[2].tanh();
  Tensor o = chunks[3].sigmoid();
  Tensor cy = f * cx + i * g;
  Tensor hy = o * cy.tanh();
  Tensor workspace = at::cat({i, f, g, o}, 1);
  return {hy, cy, workspace};
}

std::tuple<Tensor, Tensor, Tensor> npu_fused_lstm_cell_backward_impl(const std::optional<Tensor>& grad_hy_opt,
                                                                     const std::optional<Tensor>& grad_cy_opt,
                                                                     const Tensor& cx, const Tensor& cy,
                                                                     const Tensor& workspace, bool has_bias) {
  const bool has_grad_hy = grad_hy_opt.has_value() && grad_hy_opt->defined();
  const bool has_grad_cy = grad_cy_opt.has_value() && grad_cy_opt->defined();
  if (!has_grad_hy && !has_grad_cy) return {};
  auto gates = workspace.chunk(4, 1);
  const Tensor& i = gates[0];
  const Tensor& f = gates[1];
  const Tensor& g = gates[2];
  const Tensor& o = gates[3];
  Tensor tanh_cy = cy.tanh();
  Tensor grad_hy = has_grad_hy ? *grad_hy_opt : at::zeros_like(cy);
  Tensor grad_c = grad_hy * o * (1 - tanh_cy * tanh_cy);
  if (has_grad_cy) grad_c = grad_c + *grad_cy_opt;
  Tensor grad_i = grad_c * g * (1 - i) * i;
  Tensor grad_f = grad_c * cx * (1 - f) * f;
  Tensor grad_g = grad_c * i * (1 - g * g);
  Tensor grad_o = grad_hy * tanh_cy * (1 - o) * o;
  Tensor grad_gates = at::cat({grad_i, grad_f, grad_g, grad_o}, 1);
  Tensor grad_cx = grad_c * f;
  Tensor grad_bias = has_bias ? grad_gates.sum(0) : Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<Tensor, Tensor> npu_fused_gru_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
                                              const std::optional<Tensor>& input_bias,
                                              const std::optional<Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes() && input_gates.dim() == 2 &&
                  input_gates.size(1) == 3 * hx.size(-1),
              "_thnn_fused_gru_cell: expected input and hidden gates of shape [batch, 3 * hidden], got ",
              input_gates.sizes(), " and ", hidden_gates.sizes(), " for a hidden state of shape ", hx.sizes());
  auto in = add_bias(input_gates, input_bias).chunk(3, 1);
  auto hid = add_bias(hidden_gates, hidden_bias).chunk(3, 1);
  Tensor r = (in[0] + hid[0]).sigmoid();
  Tensor z = (in[1] + hid[1]).sigmoid();
  const Tensor& hn = hid[2];
  Tensor n = (in[2] + r * hn).tanh();
  Tensor hy = n + z * (hx - n);
  Tensor workspace = at::cat({r, z, n, hx, hn}, 1);
  return {hy, workspace};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> npu_fused_gru_cell_backward(const Tensor& grad_hy,
                                                                              const Tensor& workspace,
                                                                              bool has_bias) {
  auto parts = workspace.chunk(5, 1);
  const Tensor& r = parts[0];
  const Tensor& z = parts[1];
  const Tensor& n = parts[2];
  const Tensor& hx = parts[3];
  const Tensor& hn = parts[4];
  Tensor grad_z = grad_hy * (hx - n) * (1 - z) * z;
  Tensor grad_hx = grad_hy * z;
  Tensor grad_n = grad_hy * (1 - z) * (1 - n * n);
  Tensor grad_hn = grad_n * r;
  Tensor grad_r = grad_n * hn * (1 - r) * r;
  Tensor grad_input_gates = at::cat({grad_r, grad_z, grad_n}, 1);
  Tensor grad_hidden_gates = at::cat({grad_r, grad_z, grad_hn}, 1);
  Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : Tensor();
  Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(npu_fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(npu_fused_lstm_cell_backward_impl));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(npu_fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(npu_fused_gru_cell_backward));
}

}  // namespace torch_npu
