"""The fused sequence layers of Ascend's older model zoo: ``npu_lstm`` (one LSTM layer over a
whole sequence, Ascend's DynamicRNN) and ``npu_multi_head_attention`` (fairseq's attention
block with its projections), each with the backward Ascend defines.

Semantics (Ascend documentation; shapes in the ND layout the simulator keeps):

* ``npu_lstm(input (T, B, I), weight (I + H, 4H), bias (4H,), seq_mask, h (1, B, H),
  c (1, B, H), ...)``: per step ``[i, j, f, o] = split([x_t, h_{t-1}] @ weight + bias)``
  (DynamicRNN's gate order), ``c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(j)``,
  ``h_t = sigmoid(o) * tanh(c_t)``. ``seq_mask`` is either ``(T, B, H)`` 0/1 or ``(B,)``
  int32 lengths: a masked step keeps ``h`` and ``c`` and outputs zero. Returns
  ``(y, output_h, output_c, i, j, f, o, tanhc)``, each ``(T, B, H)`` (the gates after their
  activations). One layer, one direction, sequence first: what Ascend supports
  (``num_layers=1``, ``dropout=0``, ``bidirectional``/``batch_first``/``flag_seq`` False).
  The backward (``npu_lstm_backward``) is the exact gradient of this recurrence for input,
  weight, bias, h and c from the gradients of ``y``, ``output_h`` and ``output_c``.
* ``npu_multi_head_attention(query (B*T, E), key (B*S, E), value (B*S, E), the four
  (E, E) projection weights and biases (``x @ W.T + b``), attn_mask (B, N, T, S), dropout_mask,
  N, D, S, T, dropout_prob, softmax_use_float)``: ``q, k, v`` projected and split into
  ``N`` heads of ``D``; ``attn_scores = q @ k^T / sqrt(D) + attn_mask``;
  ``attn_res = softmax(attn_scores)``, dropped with probability ``dropout_prob`` (the given
  ``dropout_mask`` when it has the scores' shape, else a fresh one from the npu generator);
  ``context = attn_res @ v`` merged to ``(B*T, E)``; ``y = context @ W_out.T + b_out``.
  Returns ``(y, dropout_mask, query_res, key_res, value_res, attn_scores, attn_res,
  context)``, the ``*_res`` as ``(B, N, len, D)``. ``y`` is differentiable (the backward
  ``npu_multi_head_attention_backward`` returns the 11 input gradients).

Arithmetic is float32 (``softmax_use_float`` is therefore always honoured), rounded once.
Both backwards are autograd of the forward formula (``_formula_backward``).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._formula_backward import vjp
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_lstm", "npu_multi_head_attention"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions


# --- npu_lstm ------------------------------------------------------------------------------

def _check_lstm_args(x, weight, bias, seq_mask, h, c, has_biases, num_layers, dropout, bidirectional, batch_first,
                     flag_seq) -> int:
    op = "npu_lstm"
    for name, value in (("input", x), ("weight", weight), ("bias", bias), ("h", h), ("c", c)):
        check.tensor(op, name, value)
    check.dtype(op, "input", x, (torch.float16, torch.float32))
    check.rank(op, "input", x, (3,))
    steps, batch, features = x.shape
    if weight.dim() != 2 or weight.shape[1] % 4:
        raise ValueError(f"{op}: weight must have shape (input_size + hidden_size, 4 * hidden_size), got {tuple(weight.shape)}")
    hidden = weight.shape[1] // 4
    if weight.shape[0] != features + hidden:
        raise ValueError(f"{op}: weight has {weight.shape[0]} rows; input_size + hidden_size = {features + hidden}")
    if tuple(bias.shape) != (4 * hidden,):
        raise ValueError(f"{op}: bias must have shape ({4 * hidden},), got {tuple(bias.shape)}")
    for name, value in (("h", h), ("c", c)):
        if tuple(value.shape) != (1, batch, hidden):
            raise ValueError(f"{op}: {name} must have shape (1, {batch}, {hidden}), got {tuple(value.shape)}")
    if num_layers != 1 or dropout != 0 or bidirectional or batch_first or flag_seq:
        raise ValueError(
            f"{op}: only one layer, one direction, sequence-first input and no dropout are supported (as on "
            f"Ascend); got num_layers={num_layers}, dropout={dropout}, bidirectional={bidirectional}, "
            f"batch_first={batch_first}, flag_seq={flag_seq}"
        )
    if seq_mask is not None and seq_mask.numel() and seq_mask.dim() not in (1, 3):
        raise ValueError(f"{op}: seq_mask must be (T, B, H) 0/1 or (B,) lengths, got shape {tuple(seq_mask.shape)}")
    return hidden


def _step_masks(seq_mask, steps, batch, hidden, device):
    if seq_mask is None or seq_mask.numel() == 0:
        return None
    if seq_mask.dim() == 1:
        t = torch.arange(steps, device=device).view(steps, 1, 1)
        return (t < seq_mask.long().view(1, batch, 1)).float().expand(steps, batch, hidden)
    return seq_mask.float()


def _lstm_formula(x, weight, bias, h0, c0, masks, has_biases):
    steps = x.shape[0]
    h, c = h0[0], c0[0]
    outputs = {name: [] for name in ("y", "h", "c", "i", "j", "f", "o", "tanhc")}
    for t in range(steps):
        gates = torch.cat([x[t], h], dim=1) @ weight
        if has_biases:
            gates = gates + bias
        i, j, f, o = gates.chunk(4, dim=1)
        i, j, f, o = torch.sigmoid(i), torch.tanh(j), torch.sigmoid(f), torch.sigmoid(o)
        c_new = f * c + i * j
        tanhc = torch.tanh(c_new)
        h_new = o * tanhc
        if masks is not None:
            m = masks[t]
            y = h_new * m
            h_new = m * h_new + (1 - m) * h
            c_new = m * c_new + (1 - m) * c
        else:
            y = h_new
        h, c = h_new, c_new
        for name, value in (("y", y), ("h", h), ("c", c), ("i", i), ("j", j), ("f", f), ("o", o), ("tanhc", tanhc)):
            outputs[name].append(value)
    return tuple(torch.stack(outputs[name]) for name in ("y", "h", "c", "i", "j", "f", "o", "tanhc"))


def _lstm(input, weight, bias, seq_mask, h, c, has_biases, num_layers, dropout, train, bidirectional, batch_first,
          flag_seq, direction):
    hidden = _check_lstm_args(input, weight, bias, seq_mask, h, c, has_biases, num_layers, dropout, bidirectional,
                              batch_first, flag_seq)
    masks = _step_masks(seq_mask, input.shape[0], input.shape[1], hidden, input.device)
    results = _lstm_formula(input.float(), weight.float(), bias.float(), h.float(), c.float(), masks, has_biases)
    return tuple(r.to(input.dtype) for r in results)


def _lstm_fake(input, weight, bias, seq_mask, h, c, has_biases, num_layers, dropout, train, bidirectional, batch_first,
               flag_seq, direction):
    hidden = _check_lstm_args(input, weight, bias, seq_mask, h, c, has_biases, num_layers, dropout, bidirectional,
                              batch_first, flag_seq)
    return tuple(input.new_empty((input.shape[0], input.shape[1], hidden)) for _ in range(8))


def _lstm_backward(grady, gradh, gradc, input, weight, bias, hx, cx, y_output, h_output, c_output, i, j, f, o, tanhc):
    # Ascend's backward takes no seq_mask: a masked element is one whose output is 0 while h
    # and c are carried over unchanged, which the forward's outputs show exactly.
    carried = ((y_output == 0) & (h_output == torch.cat([hx, h_output[:-1]], 0))
               & (c_output == torch.cat([cx, c_output[:-1]], 0)))
    masks = None if not bool(carried.any()) else (~carried).float()
    grads = [g if g is not None else torch.zeros_like(y_output) for g in (grady, gradh, gradc)]

    def formula(x, w, b, h0, c0):
        y, h, c, *_ = _lstm_formula(x, w, b, h0, c0, masks, True)
        return torch.stack([y, h, c])

    return vjp(formula, (input, weight, bias, hx, cx), torch.stack(grads))


def _lstm_backward_fake(grady, gradh, gradc, input, weight, bias, hx, cx, y_output, h_output, c_output, i, j, f, o,
                        tanhc):
    return tuple(t.new_empty(t.shape) for t in (input, weight, bias, hx, cx))


def _lstm_setup_context(ctx, inputs, output) -> None:
    x, weight, bias, _mask, h, c = inputs[:6]
    for extra in output[3:]:
        ctx.mark_non_differentiable(extra)
    ctx.save_for_backward(x, weight, bias, h, c, *output)


def _lstm_autograd(ctx, grad_y, grad_h, grad_c, *_rest):
    saved = ctx.saved_tensors
    dx, dw, db, dh, dc = torch.ops.npu.npu_lstm_backward(grad_y, grad_h, grad_c, *saved)
    return (dx, dw, db, None, dh, dc) + (None,) * 8


_family.define(
    "npu_lstm(Tensor input, Tensor weight, Tensor bias, Tensor seq_mask, Tensor h, Tensor c, bool has_biases, "
    "int num_layers, float dropout, bool train, bool bidirectional, bool batch_first, bool flag_seq, bool direction) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    kernel=_lstm, fake=_lstm_fake, backward=_lstm_autograd, setup_context=_lstm_setup_context,
)
_family.define(
    "npu_lstm_backward(Tensor? grady, Tensor? gradh, Tensor? gradc, Tensor input, Tensor weight, Tensor bias, "
    "Tensor hx, Tensor cx, Tensor y_output, Tensor h_output, Tensor c_output, Tensor i, Tensor j, Tensor f, "
    "Tensor o, Tensor tanhc) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    kernel=_lstm_backward, fake=_lstm_backward_fake,
)


def npu_lstm(inputs, weight, bias, seqMask, h, c, has_biases, num_layers, dropout, train, bidirectional, batch_first,
             flagSeq, direction):
    """``torch.ops.npu.npu_lstm`` under the Python signature Ascend exports."""
    return torch.ops.npu.npu_lstm(inputs, weight, bias, seqMask, h, c, has_biases, num_layers, dropout, train,
                                  bidirectional, batch_first, flagSeq, direction)


# --- npu_multi_head_attention --------------------------------------------------------------

def _check_mha_args(query, key, value, weights, attn_mask, heads, head_dim, src_len, tgt_len, dropout_prob):
    op = "npu_multi_head_attention"
    for name, t in (("query", query), ("key", key), ("value", value), ("attn_mask", attn_mask)):
        check.tensor(op, name, t)
    check.dtype(op, "query", query, check.FLOATING)
    embed = heads * head_dim
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() != 2 or t.shape[1] != embed:
            raise ValueError(f"{op}: {name} must have shape (batch * length, attn_head_num * attn_dim_per_head = {embed}), got {tuple(t.shape)}")
    for name, w in weights.items():
        check.tensor(op, name, w)
        if tuple(w.shape) != (embed, embed):
            raise ValueError(f"{op}: {name} must have shape ({embed}, {embed}), got {tuple(w.shape)}")
    if query.shape[0] % tgt_len or key.shape[0] != value.shape[0] or key.shape[0] % src_len:
        raise ValueError(f"{op}: query rows must be batch * tgt_len ({tgt_len}) and key/value rows batch * src_len ({src_len})")
    batch = query.shape[0] // tgt_len
    if key.shape[0] // src_len != batch:
        raise ValueError(f"{op}: query holds {batch} sequences but key holds {key.shape[0] // src_len}")
    if not 0.0 <= dropout_prob < 1.0:
        raise ValueError(f"{op}: dropout_prob={dropout_prob} must be in [0, 1)")
    return batch


def _mha_formula(query, key, value, wq, wk, wv, wo, bq, bk, bv, bo, attn_mask, keep, heads, head_dim, src_len,
                 tgt_len, dropout_prob):
    batch = query.shape[0] // tgt_len

    def heads_of(x, length):
        return x.reshape(batch, length, heads, head_dim).transpose(1, 2)

    q = heads_of(F.linear(query, wq, bq), tgt_len)
    k = heads_of(F.linear(key, wk, bk), src_len)
    v = heads_of(F.linear(value, wv, bv), src_len)
    scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim) + attn_mask
    probs = torch.softmax(scores, dim=-1)
    dropped = probs * keep / (1.0 - dropout_prob)
    context = (dropped @ v).transpose(1, 2).reshape(batch * tgt_len, heads * head_dim)
    y = F.linear(context, wo, bo)
    return y, q, k, v, scores, probs, context


def _keep_mask(dropout_mask, shape, dropout_prob, device):
    if dropout_prob == 0.0:
        return torch.ones(shape, dtype=torch.uint8, device=device)
    if dropout_mask is not None and tuple(dropout_mask.shape) == tuple(shape):
        return (dropout_mask != 0).to(torch.uint8)
    return (torch.rand(shape, device=device) >= dropout_prob).to(torch.uint8)


def _mha(query, key, value, query_weight, key_weight, value_weight, attn_mask, out_proj_weight, query_bias, key_bias,
         value_bias, out_proj_bias, dropout_mask, attn_head_num, attn_dim_per_head, src_len, tgt_len, dropout_prob,
         softmax_use_float):
    weights = {"query_weight": query_weight, "key_weight": key_weight, "value_weight": value_weight,
               "out_proj_weight": out_proj_weight}
    batch = _check_mha_args(query, key, value, weights, attn_mask, attn_head_num, attn_dim_per_head, src_len, tgt_len,
                            dropout_prob)
    keep = _keep_mask(dropout_mask, (batch, attn_head_num, tgt_len, src_len), dropout_prob, query.device)
    f32 = [None if t is None else t.float() for t in (query, key, value, query_weight, key_weight, value_weight,
                                                       out_proj_weight, query_bias, key_bias, value_bias, out_proj_bias)]
    y, q, k, v, scores, probs, context = _mha_formula(*f32, attn_mask.float(), keep, attn_head_num, attn_dim_per_head,
                                                      src_len, tgt_len, dropout_prob)
    dtype = query.dtype
    return (y.to(dtype), keep, *(t.to(dtype).contiguous() for t in (q, k, v, scores, probs)), context.to(dtype))


def _mha_fake(query, key, value, query_weight, key_weight, value_weight, attn_mask, out_proj_weight, query_bias,
              key_bias, value_bias, out_proj_bias, dropout_mask, attn_head_num, attn_dim_per_head, src_len, tgt_len,
              dropout_prob, softmax_use_float):
    weights = {"query_weight": query_weight, "key_weight": key_weight, "value_weight": value_weight,
               "out_proj_weight": out_proj_weight}
    batch = _check_mha_args(query, key, value, weights, attn_mask, attn_head_num, attn_dim_per_head, src_len, tgt_len,
                            dropout_prob)
    n, d = attn_head_num, attn_dim_per_head
    attn = (batch, n, tgt_len, src_len)
    return (query.new_empty(query.shape), query.new_empty(attn, dtype=torch.uint8),
            query.new_empty((batch, n, tgt_len, d)), query.new_empty((batch, n, src_len, d)),
            query.new_empty((batch, n, src_len, d)), query.new_empty(attn), query.new_empty(attn),
            query.new_empty(query.shape))


def _mha_backward(query, key, value, query_weight, key_weight, value_weight, out_proj_weight, query_bias, key_bias,
                  value_bias, out_proj_bias, query_res, key_res, value_res, attn_scores, attn_res, context, y_grad,
                  dropout_mask, attn_head_num, attn_dim_per_head, src_len, tgt_len, dropout_prob, softmax_use_float):
    embed = attn_head_num * attn_dim_per_head
    biases = [b if b is not None else query.new_zeros((embed,)) for b in (query_bias, key_bias, value_bias, out_proj_bias)]
    # attn_mask is recovered from the saved scores: scores - q @ k^T / sqrt(D).
    mask = attn_scores.float() - query_res.float() @ key_res.float().transpose(-1, -2) / math.sqrt(attn_dim_per_head)

    def formula(q, k, v, wq, wk, wv, wo, bq, bk, bv, bo):
        return _mha_formula(q, k, v, wq, wk, wv, wo, bq, bk, bv, bo, mask, dropout_mask, attn_head_num,
                            attn_dim_per_head, src_len, tgt_len, dropout_prob)[0]

    grads = vjp(formula, (query, key, value, query_weight, key_weight, value_weight, out_proj_weight, *biases), y_grad)
    # Ascend's order: the four weight gradients, query, key, value, then the four biases.
    gq, gk, gv, gwq, gwk, gwv, gwo, gbq, gbk, gbv, gbo = grads
    return gwq, gwk, gwv, gwo, gq, gk, gv, gbq, gbk, gbv, gbo


def _mha_backward_fake(query, key, value, query_weight, key_weight, value_weight, out_proj_weight, query_bias,
                       key_bias, value_bias, out_proj_bias, query_res, key_res, value_res, attn_scores, attn_res,
                       context, y_grad, dropout_mask, attn_head_num, attn_dim_per_head, src_len, tgt_len, dropout_prob,
                       softmax_use_float):
    embed = attn_head_num * attn_dim_per_head
    return (*(w.new_empty(w.shape) for w in (query_weight, key_weight, value_weight, out_proj_weight)),
            *(t.new_empty(t.shape) for t in (query, key, value)),
            *(query.new_empty((embed,)) for _ in range(4)))


def _mha_setup_context(ctx, inputs, output) -> None:
    (query, key, value, wq, wk, wv, attn_mask, wo, bq, bk, bv, bo, _dropout_mask, heads, head_dim, src_len, tgt_len,
     dropout_prob, softmax_use_float) = inputs
    for extra in output[1:]:
        ctx.mark_non_differentiable(extra)
    ctx.has_bias = [b is not None for b in (bq, bk, bv, bo)]
    ctx.options = (heads, head_dim, src_len, tgt_len, dropout_prob, softmax_use_float)
    ctx.optional = (bq, bk, bv, bo)
    _y, keep, q_res, k_res, v_res, scores, probs, context = output
    ctx.save_for_backward(query, key, value, wq, wk, wv, wo, q_res, k_res, v_res, scores, probs, context, keep)


def _mha_autograd(ctx, grad_y, *_rest):
    query, key, value, wq, wk, wv, wo, q_res, k_res, v_res, scores, probs, context, keep = ctx.saved_tensors
    bq, bk, bv, bo = ctx.optional
    gwq, gwk, gwv, gwo, gq, gk, gv, gbq, gbk, gbv, gbo = torch.ops.npu.npu_multi_head_attention_backward(
        query, key, value, wq, wk, wv, wo, bq, bk, bv, bo, q_res, k_res, v_res, scores, probs, context, grad_y, keep,
        *ctx.options)
    bias_grads = [g if has else None for g, has in zip((gbq, gbk, gbv, gbo), ctx.has_bias)]
    return (gq, gk, gv, gwq, gwk, gwv, None, gwo, *bias_grads) + (None,) * 7


_family.define(
    "npu_multi_head_attention(Tensor query, Tensor key, Tensor value, Tensor query_weight, Tensor key_weight, "
    "Tensor value_weight, Tensor attn_mask, Tensor out_proj_weight, Tensor? query_bias, Tensor? key_bias, "
    "Tensor? value_bias, Tensor? out_proj_bias, Tensor? dropout_mask, int attn_head_num, int attn_dim_per_head, "
    "int src_len, int tgt_len, float dropout_prob, bool softmax_use_float) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    kernel=_mha, fake=_mha_fake, backward=_mha_autograd, setup_context=_mha_setup_context,
)
_family.define(
    "npu_multi_head_attention_backward(Tensor query, Tensor key, Tensor value, Tensor query_weight, Tensor key_weight, "
    "Tensor value_weight, Tensor out_proj_weight, Tensor? query_bias, Tensor? key_bias, Tensor? value_bias, "
    "Tensor? out_proj_bias, Tensor query_res, Tensor key_res, Tensor value_res, Tensor attn_scores, Tensor attn_res, "
    "Tensor context, Tensor y_grad, Tensor dropout_mask, int attn_head_num, int attn_dim_per_head, int src_len, "
    "int tgt_len, float dropout_prob, bool softmax_use_float) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    kernel=_mha_backward, fake=_mha_backward_fake,
)

npu_multi_head_attention = torch.ops.npu.npu_multi_head_attention
