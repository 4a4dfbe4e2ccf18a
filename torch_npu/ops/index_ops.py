"""Operators addressed by class or position indices, as Ascend code calls them:
``npu_one_hot`` and ``npu_scatter_nd_update``.

Semantics (Ascend documentation):

* ``npu_one_hot(self, num_classes, depth, on_value, off_value)``: a new axis of size
  ``depth`` at position ``num_classes`` (-1: last) holding ``on_value`` where the axis index
  equals the class in ``self`` and ``off_value`` elsewhere; a class outside ``[0, depth)``
  gives a row of ``off_value`` (TensorFlow's ``OneHot``). The result is float32.
* ``npu_scatter_nd_update(self, indices, updates)``: a copy of ``self`` where
  ``out[indices[j]] = updates[j]``, ``indices[..., :a]`` addressing the first ``a``
  dimensions (TensorFlow's ``ScatterNdUpdate``); ``self`` is unchanged.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_one_hot", "npu_scatter_nd_update"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions


def _check_one_hot_args(x, num_classes, depth) -> int:
    op = "npu_one_hot"
    check.tensor(op, "self", x)
    check.dtype(op, "self", x, (torch.int32, torch.int64, torch.uint8, torch.int8))
    if depth < 0:
        raise ValueError(f"{op}: depth={depth} must be non-negative")
    return check.dim_index(op, "num_classes", num_classes, x.dim() + 1)


def _one_hot(self, num_classes: int = -1, depth: int = 1, on_value=1, off_value=0):
    axis = _check_one_hot_args(self, num_classes, depth)
    classes = torch.arange(depth, device=self.device).reshape([-1] + [1] * (self.dim() - axis))
    hit = self.unsqueeze(axis).long() == classes
    on = torch.tensor(on_value, dtype=torch.float32, device=self.device)
    off = torch.tensor(off_value, dtype=torch.float32, device=self.device)
    return torch.where(hit, on, off)


def _one_hot_fake(self, num_classes: int = -1, depth: int = 1, on_value=1, off_value=0):
    axis = _check_one_hot_args(self, num_classes, depth)
    shape = list(self.shape)
    shape.insert(axis, depth)
    return self.new_empty(shape, dtype=torch.float32)


_family.define(
    "npu_one_hot(Tensor self, int num_classes=-1, int depth=1, Scalar on_value=1, Scalar off_value=0) -> Tensor",
    kernel=_one_hot, fake=_one_hot_fake, decompose=True,
)


def _check_scatter_nd_args(x, indices, updates) -> None:
    op = "npu_scatter_nd_update"
    for name, value in (("self", x), ("indices", indices), ("updates", updates)):
        check.tensor(op, name, value)
    check.dtype(op, "indices", indices, (torch.int32, torch.int64))
    check.same_dtype(op, "updates", updates, "self", x)
    if indices.dim() < 2 or not 1 <= indices.shape[-1] <= x.dim():
        raise ValueError(
            f"{op}: indices must have at least 2 dimensions and a last dimension of 1 to {x.dim()} "
            f"(the dimensions of self it addresses), got shape {tuple(indices.shape)}"
        )
    expected = tuple(indices.shape[:-1]) + tuple(x.shape[indices.shape[-1]:])
    if tuple(updates.shape) != expected:
        raise ValueError(f"{op}: updates must have shape {expected} (indices.shape[:-1] + self.shape[a:]), got {tuple(updates.shape)}")


def _scatter_nd_update(self, indices, updates):
    _check_scatter_nd_args(self, indices, updates)
    # Functional index_put (no in-place write), so that Inductor can decompose into it.
    return self.contiguous().index_put(tuple(indices.long().unbind(-1)), updates)


def _scatter_nd_update_fake(self, indices, updates):
    _check_scatter_nd_args(self, indices, updates)
    return self.new_empty(self.shape)


_family.define("npu_scatter_nd_update(Tensor self, Tensor indices, Tensor updates) -> Tensor",
               kernel=_scatter_nd_update, fake=_scatter_nd_update_fake, decompose=True)

npu_one_hot = torch.ops.npu.npu_one_hot
npu_scatter_nd_update = torch.ops.npu.npu_scatter_nd_update
