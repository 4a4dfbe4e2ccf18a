"""Softmax fusions as Ascend code calls them: ``npu_softmax_cross_entropy_with_logits`` and
``npu_dropout_with_add_softmax``, each with the backward Ascend defines.

Formulas (Ascend documentation):

* ``npu_softmax_cross_entropy_with_logits(features, labels)``: per row of the 2-D
  ``features``, ``loss = -sum(labels * log_softmax(features))`` (shape ``(batch,)``). Backward:
  ``grad * (softmax(features) * sum(labels) - labels)``.
* ``npu_dropout_with_add_softmax(self, x1, alpha, prob, dim)``: ``softmax = softmax(x1 + alpha *
  self, dim)``; a keep mask drawn with probability ``1 - prob`` from the npu generator
  (``torch.manual_seed`` makes it reproducible); ``dropout = softmax * mask / (1 - prob)``.
  Returns ``(mask, softmax, dropout)``; only ``dropout`` is differentiable, its backward
  (``npu_dropout_with_add_softmax_backward``) returns the gradients of ``self`` and ``x1``.
  Ascend's kernel requires ``dim=-1`` and restricts shapes (H, W in 128..512, N*C % 32 == 0);
  the simulator accepts any 4-D shape and ``dim=-1``.

Arithmetic is float32, rounded once to the input dtype; the mask is uint8.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_softmax_cross_entropy_with_logits", "npu_dropout_with_add_softmax"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions


# --- npu_softmax_cross_entropy_with_logits -------------------------------------------------

def _check_ce_args(op, features, labels) -> None:
    check.tensor(op, "self", features)
    check.tensor(op, "labels", labels)
    check.dtype(op, "self", features, check.FLOATING)
    check.same_dtype(op, "labels", labels, "self", features)
    check.rank(op, "self", features, (2,))
    if tuple(labels.shape) != tuple(features.shape):
        raise ValueError(f"{op}: labels must have the shape of self {tuple(features.shape)}, got {tuple(labels.shape)}")


def _cross_entropy(self, labels):
    _check_ce_args("npu_softmax_cross_entropy_with_logits", self, labels)
    loss = -(labels.float() * torch.log_softmax(self.float(), dim=-1)).sum(dim=-1)
    return loss.to(self.dtype)


def _cross_entropy_fake(self, labels):
    _check_ce_args("npu_softmax_cross_entropy_with_logits", self, labels)
    return self.new_empty((self.shape[0],))


def _cross_entropy_backward(grad, self, labels):
    _check_ce_args("npu_softmax_cross_entropy_with_logits_backward", self, labels)
    y = labels.float()
    dx = torch.softmax(self.float(), dim=-1) * y.sum(-1, keepdim=True) - y
    return (grad.float().unsqueeze(-1) * dx).to(self.dtype)


def _cross_entropy_backward_fake(grad, self, labels):
    _check_ce_args("npu_softmax_cross_entropy_with_logits_backward", self, labels)
    return self.new_empty(self.shape)


def _ce_setup_context(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs)


def _ce_autograd(ctx, grad):
    self, labels = ctx.saved_tensors
    return torch.ops.npu.npu_softmax_cross_entropy_with_logits_backward(grad, self, labels), None


_family.define("npu_softmax_cross_entropy_with_logits(Tensor self, Tensor labels) -> Tensor",
               kernel=_cross_entropy, fake=_cross_entropy_fake, backward=_ce_autograd,
               setup_context=_ce_setup_context, decompose=True)
_family.define("npu_softmax_cross_entropy_with_logits_backward(Tensor grad, Tensor self, Tensor labels) -> Tensor",
               kernel=_cross_entropy_backward, fake=_cross_entropy_backward_fake, decompose=True)


# --- npu_dropout_with_add_softmax ----------------------------------------------------------

def _check_dropout_args(op, x, x1, prob, dim) -> None:
    check.tensor(op, "self", x)
    check.tensor(op, "x1", x1)
    check.dtype(op, "self", x, check.FLOATING)
    check.same_dtype(op, "x1", x1, "self", x)
    check.rank(op, "self", x, (4,))
    if tuple(x1.shape) != tuple(x.shape):
        raise ValueError(f"{op}: x1 must have the shape of self {tuple(x.shape)}, got {tuple(x1.shape)}")
    if not 0.0 <= prob < 1.0:
        raise ValueError(f"{op}: prob={prob} must be in [0, 1) (the probability of dropping an element)")
    if dim != -1 and dim != x.dim() - 1:
        raise ValueError(f"{op}: dim={dim} is not supported; Ascend computes the softmax over dim=-1")


def _dropout_with_add_softmax(self, x1, alpha, prob: float, dim: int):
    _check_dropout_args("npu_dropout_with_add_softmax", self, x1, prob, dim)
    softmax = torch.softmax(x1.float() + float(alpha) * self.float(), dim=-1)
    mask = (torch.rand(self.shape, device=self.device) >= prob).to(torch.uint8)
    dropout = softmax * mask / (1.0 - prob)
    return mask, softmax.to(self.dtype), dropout.to(self.dtype)


def _dropout_with_add_softmax_fake(self, x1, alpha, prob: float, dim: int):
    _check_dropout_args("npu_dropout_with_add_softmax", self, x1, prob, dim)
    return self.new_empty(self.shape, dtype=torch.uint8), self.new_empty(self.shape), self.new_empty(self.shape)


def _dropout_backward(grad, mask, softmax_out, alpha, prob: float, dim: int):
    g = grad.float() * mask / (1.0 - prob)
    s = softmax_out.float()
    grad_y = s * (g - (g * s).sum(dim=dim, keepdim=True))
    return (grad_y * float(alpha)).to(grad.dtype), grad_y.to(grad.dtype)


def _dropout_backward_fake(grad, mask, softmax_out, alpha, prob: float, dim: int):
    return grad.new_empty(grad.shape), grad.new_empty(grad.shape)


def _dropout_setup_context(ctx, inputs, output) -> None:
    _self, _x1, alpha, prob, dim = inputs
    mask, softmax, _dropout = output
    ctx.mark_non_differentiable(mask, softmax)
    ctx.options = (alpha, prob, dim)
    ctx.save_for_backward(mask, softmax)


def _dropout_autograd(ctx, _grad_mask, _grad_softmax, grad):
    mask, softmax = ctx.saved_tensors
    grad_self, grad_x1 = torch.ops.npu.npu_dropout_with_add_softmax_backward(grad, mask, softmax, *ctx.options)
    return grad_self, grad_x1, None, None, None


_family.define(
    "npu_dropout_with_add_softmax(Tensor self, Tensor x1, Scalar alpha, float prob, int dim) -> (Tensor, Tensor, Tensor)",
    kernel=_dropout_with_add_softmax, fake=_dropout_with_add_softmax_fake, backward=_dropout_autograd,
    setup_context=_dropout_setup_context,
)
_family.define(
    "npu_dropout_with_add_softmax_backward(Tensor grad, Tensor mask, Tensor softmax_out, Scalar alpha, float prob, "
    "int dim) -> (Tensor, Tensor)",
    kernel=_dropout_backward, fake=_dropout_backward_fake, decompose=True,
)

npu_softmax_cross_entropy_with_logits = torch.ops.npu.npu_softmax_cross_entropy_with_logits
npu_dropout_with_add_softmax = torch.ops.npu.npu_dropout_with_add_softmax
