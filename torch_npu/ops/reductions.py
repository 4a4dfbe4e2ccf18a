"""``npu_max``: Ascend's maximum along a dimension, returning int32 indices, with its backward.

Semantics (Ascend documentation): ``torch.max(self, dim, keepdim)`` with the indices as int32
(ties: the first maximum). ``npu_max_backward`` puts the gradient at the maximum's index and
zero elsewhere.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_max"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions


def _check_max_args(op, x, dim) -> int:
    check.tensor(op, "self", x)
    if x.dim() == 0:
        raise ValueError(f"{op}: self must have at least 1 dimension")
    return check.dim_index(op, "dim", dim, x.dim())


def _max(self, dim: int, keepdim: bool = False):
    dim = _check_max_args("npu_max", self, dim)
    values, indices = torch.max(self, dim, keepdim)
    return values, indices.to(torch.int32)


def _max_fake(self, dim: int, keepdim: bool = False):
    dim = _check_max_args("npu_max", self, dim)
    shape = list(self.shape)
    if keepdim:
        shape[dim] = 1
    else:
        del shape[dim]
    return self.new_empty(shape), self.new_empty(shape, dtype=torch.int32)


def _max_backward(grad, dim: int, indices, sizes, keepdim: bool):
    dim = check.dim_index("npu_max_backward", "dim", dim, len(sizes))
    if not keepdim:
        grad, indices = grad.unsqueeze(dim), indices.unsqueeze(dim)
    return grad.new_zeros(sizes).scatter(dim, indices.long(), grad)


def _max_backward_fake(grad, dim: int, indices, sizes, keepdim: bool):
    check.dim_index("npu_max_backward", "dim", dim, len(sizes))
    return grad.new_empty(sizes)


def _max_setup_context(ctx, inputs, output) -> None:
    self, dim, keepdim = (list(inputs) + [False])[:3]
    _values, indices = output
    ctx.mark_non_differentiable(indices)
    ctx.options = (dim, list(self.shape), keepdim)
    ctx.save_for_backward(indices)


def _max_autograd(ctx, grad, _grad_indices):
    (indices,) = ctx.saved_tensors
    dim, sizes, keepdim = ctx.options
    return torch.ops.npu.npu_max_backward(grad, dim, indices, sizes, keepdim), None, None


_family.define(
    "npu_max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
    kernel=_max, fake=_max_fake, backward=_max_autograd, setup_context=_max_setup_context,
)
_family.define(
    "npu_max_backward(Tensor grad, int dim, Tensor indices, SymInt[] sizes, bool keepdim) -> Tensor",
    kernel=_max_backward, fake=_max_backward_fake, decompose=True,
)

npu_max = torch.ops.npu.npu_max
