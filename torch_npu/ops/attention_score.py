"""``npu_fused_attention_score``: BERT's fused attention block as Ascend code calls it, with
its backward.

Formula (Ascend documentation): with ``q, k, v`` of shape ``(B, N, S, D)`` (the ``*_transpose``
flags say an input arrives with its last two dimensions swapped),
``probs = softmax(q @ k^T * scale + attention_mask)``, a keep mask drawn with probability
``keep_prob`` from the npu generator, ``context = (probs * mask / keep_prob) @ v``, returned
as ``(B * S, N * D)`` (heads merged back, as Ascend's fused confusion transpose does).
``npu_fused_attention_score_fwd`` also returns the softmax output and the keep mask, and
``npu_fused_attention_score_backward`` is its gradient for q, k and v (the mask and the
softmax output are constants). ``bmm_score_transpose_a``/``_b`` describe Ascend's internal
fractal layout of the score matmul; only their default (False) has a layout-free meaning,
so other values are rejected. Arithmetic is float32, rounded to the inputs' dtype.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_fused_attention_score"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions


def _layouts(op, q, k, v, mask, keep_prob, query_transpose, key_transpose, value_transpose,
             bmm_score_transpose_a, bmm_score_transpose_b):
    for name, value in (("query_layer", q), ("key_layer", k), ("value_layer", v), ("attention_mask", mask)):
        check.tensor(op, name, value)
        check.rank(op, name, value, (4,))
    check.dtype(op, "query_layer", q, check.FLOATING)
    for name, value in (("bmm_score_transpose_a", bmm_score_transpose_a), ("bmm_score_transpose_b", bmm_score_transpose_b)):
        if value:
            raise ValueError(f"{op}: {name}=True describes Ascend's fractal score layout and is not supported; pass False")
    if not 0.0 < keep_prob <= 1.0:
        raise ValueError(f"{op}: keep_prob={keep_prob} must be in (0, 1]")
    q = q.transpose(-1, -2) if query_transpose else q
    k = k.transpose(-1, -2) if key_transpose else k
    v = v.transpose(-1, -2) if value_transpose else v
    if q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3] or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"{op}: query {tuple(q.shape)}, key {tuple(k.shape)} and value {tuple(v.shape)} (after the transpose "
            "flags) must be (B, N, S, D) with matching B, N, key/value sequence and query/key head size"
        )
    return q, k, v


def _context_shape(q, v):
    b, n, s, _ = q.shape
    return (b * s, n * v.shape[-1])


def _fwd(query_layer, key_layer, value_layer, attention_mask, scale, keep_prob, query_transpose=False,
         key_transpose=False, bmm_score_transpose_a=False, bmm_score_transpose_b=False, value_transpose=False,
         dx_transpose=False):
    q, k, v = _layouts("npu_fused_attention_score", query_layer, key_layer, value_layer, attention_mask, keep_prob,
                       query_transpose, key_transpose, value_transpose, bmm_score_transpose_a, bmm_score_transpose_b)
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * float(scale) + attention_mask.float()
    probs = torch.softmax(scores, dim=-1)
    keep = (torch.rand(probs.shape, device=probs.device) < keep_prob).to(torch.uint8)
    context = torch.matmul(probs * keep / keep_prob, v.float())
    b, n, s, d = context.shape
    context = context.permute(0, 2, 1, 3).reshape(b * s, n * d)
    return context.to(query_layer.dtype), probs.to(query_layer.dtype), keep


def _fwd_fake(query_layer, key_layer, value_layer, attention_mask, scale, keep_prob, query_transpose=False,
              key_transpose=False, bmm_score_transpose_a=False, bmm_score_transpose_b=False, value_transpose=False,
              dx_transpose=False):
    q, k, v = _layouts("npu_fused_attention_score", query_layer, key_layer, value_layer, attention_mask, keep_prob,
                       query_transpose, key_transpose, value_transpose, bmm_score_transpose_a, bmm_score_transpose_b)
    probs_shape = (*q.shape[:3], k.shape[2])
    return (query_layer.new_empty(_context_shape(q, v)), query_layer.new_empty(probs_shape),
            query_layer.new_empty(probs_shape, dtype=torch.uint8))


def _backward(grad_output, softmax_output, query_layer, key_layer, value_layer, mask, scale, keep_prob,
              query_transpose=False, key_transpose=False, value_transpose=False, dx_transpose=False):
    q, k, v = _layouts("npu_fused_attention_score_backward", query_layer, key_layer, value_layer, softmax_output,
                       keep_prob, query_transpose, key_transpose, value_transpose, False, False)
    b, n, s, _ = q.shape
    d_v = v.shape[-1]
    g = grad_output.float().reshape(b, s, n, d_v).permute(0, 2, 1, 3)
    probs = softmax_output.float()
    dropped = probs * mask / keep_prob
    grad_v = torch.matmul(dropped.transpose(-1, -2), g)
    grad_dropped = torch.matmul(g, v.float().transpose(-1, -2))
    grad_probs = grad_dropped * mask / keep_prob
    grad_scores = probs * (grad_probs - (grad_probs * probs).sum(-1, keepdim=True)) * float(scale)
    grad_q = torch.matmul(grad_scores, k.float())
    grad_k = torch.matmul(grad_scores.transpose(-1, -2), q.float())
    grads = []
    for grad, flag in ((grad_q, query_transpose), (grad_k, key_transpose), (grad_v, value_transpose)):
        grads.append((grad.transpose(-1, -2) if flag else grad).to(query_layer.dtype).contiguous())
    return tuple(grads)


def _backward_fake(grad_output, softmax_output, query_layer, key_layer, value_layer, mask, scale, keep_prob,
                   query_transpose=False, key_transpose=False, value_transpose=False, dx_transpose=False):
    return tuple(t.new_empty(t.shape) for t in (query_layer, key_layer, value_layer))


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, _mask, scale, keep_prob = inputs[:6]
    flags = (list(inputs[6:]) + [False] * 6)[:6]
    query_transpose, key_transpose, _a, _b, value_transpose, dx_transpose = flags
    _context, probs, keep = output
    ctx.mark_non_differentiable(probs, keep)
    ctx.options = (scale, keep_prob, query_transpose, key_transpose, value_transpose, dx_transpose)
    ctx.save_for_backward(probs, q, k, v, keep)


def _autograd(ctx, grad, _grad_probs, _grad_keep):
    probs, q, k, v, keep = ctx.saved_tensors
    grad_q, grad_k, grad_v = torch.ops.npu.npu_fused_attention_score_backward(grad, probs, q, k, v, keep, *ctx.options)
    return (grad_q, grad_k, grad_v) + (None,) * 9


_FLAGS = ("bool query_transpose=False, bool key_transpose=False, bool bmm_score_transpose_a=False, "
          "bool bmm_score_transpose_b=False, bool value_transpose=False, bool dx_transpose=False")
_family.define(
    "npu_fused_attention_score_fwd(Tensor query_layer, Tensor key_layer, Tensor value_layer, Tensor attention_mask, "
    f"Scalar scale, float keep_prob, {_FLAGS}) -> (Tensor, Tensor, Tensor)",
    kernel=_fwd, fake=_fwd_fake, backward=_autograd, setup_context=_setup_context,
)
_family.define(
    "npu_fused_attention_score_backward(Tensor grad_output, Tensor softmax_output, Tensor query_layer, "
    "Tensor key_layer, Tensor value_layer, Tensor mask, Scalar scale, float keep_prob, bool query_transpose=False, "
    "bool key_transpose=False, bool value_transpose=False, bool dx_transpose=False) -> (Tensor, Tensor, Tensor)",
    kernel=_backward, fake=_backward_fake,
)


def _fused_attention_score(*args, **kwargs):
    return torch.ops.npu.npu_fused_attention_score_fwd(*args, **kwargs)[0]


# The public operator is the first output of _fwd, differentiable through _fwd's autograd:
# a composite, as on Ascend, traced into _fwd by torch.compile and torch.export.
_family.define_schema(
    "npu_fused_attention_score(Tensor query_layer, Tensor key_layer, Tensor value_layer, Tensor attention_mask, "
    f"Scalar scale, float keep_prob, {_FLAGS}) -> Tensor"
)
_family.library.impl("npu_fused_attention_score", _fused_attention_score, "CompositeImplicitAutograd")

npu_fused_attention_score = torch.ops.npu.npu_fused_attention_score

