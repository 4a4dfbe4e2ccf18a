"""``npu_scaled_masked_softmax`` (+ backward): the softmax of scaled, masked attention scores.

Formula (Ascend documentation and its reference test): ``y = softmax(masked_fill(x * scale,
mask, -10000), dim=-1)`` in float32, rounded to ``x``'s dtype; ``mask`` is bool and
broadcasts to ``x``. With ``fixed_triu_mask=True`` the mask is the upper triangle above the
diagonal of the last two dimensions (a causal mask) and ``mask`` is not read. Backward:
``dx = scale * y * (dy - sum(dy * y, -1))``, zero where the mask is set (the masked scores do
not depend on ``x``).
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_scaled_masked_softmax"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

MASKED_SCORE = -10000.0


def _check_args(op: str, x, mask) -> None:
    check.tensor(op, "x", x)
    check.tensor(op, "mask", mask)
    check.dtype(op, "x", x, check.FLOATING)
    check.dtype(op, "mask", mask, (torch.bool,))
    if x.dim() < 2:
        raise ValueError(f"{op}: x must have at least 2 dimensions, got shape {tuple(x.shape)}")
    check.broadcastable(op, "mask", mask, "x", x)


def _effective_mask(x: torch.Tensor, mask: torch.Tensor, fixed_triu_mask: bool) -> torch.Tensor:
    if not fixed_triu_mask:
        return mask
    rows, cols = x.shape[-2], x.shape[-1]
    return torch.ones(rows, cols, dtype=torch.bool, device=x.device).triu(diagonal=1)


def _scaled_masked_softmax(x, mask, scale=1, fixed_triu_mask: bool = False):
    _check_args("npu_scaled_masked_softmax", x, mask)
    mask = _effective_mask(x, mask, fixed_triu_mask)
    scores = (x.float() * scale).masked_fill(mask, MASKED_SCORE)
    return torch.softmax(scores, dim=-1).to(x.dtype)


def _scaled_masked_softmax_fake(x, mask, scale=1, fixed_triu_mask: bool = False):
    _check_args("npu_scaled_masked_softmax", x, mask)
    return x.new_empty(x.shape)


def _scaled_masked_softmax_backward(y_grad, y, mask, scale, fixed_triu_mask: bool):
    _check_args("npu_scaled_masked_softmax_backward", y, mask)
    mask = _effective_mask(y, mask, fixed_triu_mask)
    y32 = y.float()
    g = y_grad.float()
    grad = (g - (g * y32).sum(dim=-1, keepdim=True)) * y32 * scale
    return grad.masked_fill(mask, 0.0).to(y.dtype)


def _scaled_masked_softmax_backward_fake(y_grad, y, mask, scale, fixed_triu_mask: bool):
    _check_args("npu_scaled_masked_softmax_backward", y, mask)
    return y_grad.new_empty(y_grad.shape)


def _setup_context(ctx, inputs, output) -> None:
    _x, mask, scale, fixed_triu_mask = inputs
    ctx.scale = scale
    ctx.fixed_triu_mask = fixed_triu_mask
    ctx.save_for_backward(output, mask)


def _autograd(ctx, grad):
    y, mask = ctx.saved_tensors
    dx = torch.ops.npu.npu_scaled_masked_softmax_backward(
        grad, y, mask, ctx.scale, ctx.fixed_triu_mask
    )
    return dx, None, None, None


_family.define(
    "npu_scaled_masked_softmax(Tensor x, Tensor mask, Scalar scale=1, "
    "bool fixed_triu_mask=False) -> Tensor",
    kernel=_scaled_masked_softmax,
    fake=_scaled_masked_softmax_fake,
    backward=_autograd,
    setup_context=_setup_context,
    decompose=True,
)
_family.define(
    "npu_scaled_masked_softmax_backward(Tensor y_grad, Tensor y, Tensor mask, Scalar scale, "
    "bool fixed_triu_mask) -> Tensor",
    kernel=_scaled_masked_softmax_backward,
    fake=_scaled_masked_softmax_backward_fake,
    decompose=True,
)

npu_scaled_masked_softmax = torch.ops.npu.npu_scaled_masked_softmax
