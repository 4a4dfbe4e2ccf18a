"""``npu_confusion_transpose`` (+ backward): a reshape and a permutation fused into one copy.

Semantics (Ascend documentation): with ``transpose_first=True`` the result is
``x.permute(perm).reshape(shape)``, otherwise ``x.reshape(shape).permute(perm)``; either way a
new contiguous tensor (Ascend's kernel writes the rearranged data). The backward, as Ascend
derives it, is the same operator run the other way round: ``grad`` rearranged with the
inverse permutation back to ``x``'s shape, with ``transpose_first`` flipped.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_confusion_transpose"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions


def _check_perm(op: str, perm, ndim: int, what: str) -> None:
    if sorted(perm) != list(range(ndim)):
        raise ValueError(
            f"{op}: perm={list(perm)} must be a permutation of 0..{ndim - 1} (the dimensions of "
            f"{what})"
        )


def _rearranged(op: str, x, perm, shape, transpose_first: bool):
    check.tensor(op, "self", x)
    if transpose_first:
        _check_perm(op, perm, x.dim(), "self")
        moved = x.permute(perm)
        check.condition(
            moved.numel() == _numel(shape),
            f"{op}: shape={list(shape)} does not hold the {moved.numel()} elements of self",
        )
        return moved.reshape(shape)
    check.condition(
        x.numel() == _numel(shape),
        f"{op}: shape={list(shape)} does not hold the {x.numel()} elements of self",
    )
    _check_perm(op, perm, len(shape), "shape")
    return x.reshape(shape).permute(perm)


def _numel(shape) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def _confusion_transpose(self, perm, shape, transpose_first: bool):
    out = _rearranged("npu_confusion_transpose", self, perm, shape, transpose_first)
    return out.clone(memory_format=torch.contiguous_format)


def _confusion_transpose_fake(self, perm, shape, transpose_first: bool):
    out = _rearranged("npu_confusion_transpose", self, perm, shape, transpose_first)
    return self.new_empty(out.shape)


def _inverse(perm) -> list[int]:
    inverse = [0] * len(perm)
    for position, dim in enumerate(perm):
        inverse[dim] = position
    return inverse


def _backward_rearranged(grad, perm, shape, transpose_first: bool):
    # shape is the forward input's shape; transpose_first is the forward's, flipped.
    inverse = _inverse(perm)
    if transpose_first:
        return grad.permute(inverse).reshape(shape)
    return grad.reshape([shape[dim] for dim in perm]).permute(inverse)


def _confusion_transpose_backward(grad, perm, shape, transpose_first: bool):
    check.tensor("npu_confusion_transpose_backward", "grad", grad)
    out = _backward_rearranged(grad, perm, shape, transpose_first)
    return out.clone(memory_format=torch.contiguous_format)


def _confusion_transpose_backward_fake(grad, perm, shape, transpose_first: bool):
    return grad.new_empty(_backward_rearranged(grad, perm, shape, transpose_first).shape)


def _setup_context(ctx, inputs, output) -> None:
    self, perm, _shape, transpose_first = inputs
    ctx.perm = list(perm)
    ctx.input_shape = list(self.shape)
    ctx.transpose_first = transpose_first


def _autograd(ctx, grad):
    dx = torch.ops.npu.npu_confusion_transpose_backward(
        grad, ctx.perm, ctx.input_shape, not ctx.transpose_first
    )
    return dx, None, None, None


_family.define(
    "npu_confusion_transpose(Tensor self, int[] perm, int[] shape, bool transpose_first) -> Tensor",
    kernel=_confusion_transpose,
    fake=_confusion_transpose_fake,
    backward=_autograd,
    setup_context=_setup_context,
    decompose=True,
)
_family.define(
    "npu_confusion_transpose_backward(Tensor grad, int[] perm, SymInt[] shape, "
    "bool transpose_first) -> Tensor",
    kernel=_confusion_transpose_backward,
    fake=_confusion_transpose_backward_fake,
    decompose=True,
)

npu_confusion_transpose = torch.ops.npu.npu_confusion_transpose
