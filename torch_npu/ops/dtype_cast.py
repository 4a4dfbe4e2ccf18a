"""``npu_dtype_cast`` (+ backward): a dtype conversion that is always a new tensor.

Semantics (Ascend documentation): ``input`` converted to ``dtype`` (``torch.dtype``), like
``tensor.to(dtype)`` but never returning ``input`` itself. The result is differentiable when
``dtype`` is a floating or complex type; the gradient is cast back to the input's dtype.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_dtype_cast"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions


def _dtype_cast(self, dtype):
    check.tensor("npu_dtype_cast", "input", self)
    return self.to(dtype, copy=True)


def _dtype_cast_fake(self, dtype):
    check.tensor("npu_dtype_cast", "input", self)
    return torch.empty_like(self, dtype=dtype)


def _dtype_cast_backward(grad, dtype):
    check.tensor("npu_dtype_cast_backward", "grad", grad)
    return grad.to(dtype, copy=True)


def _dtype_cast_backward_fake(grad, dtype):
    return torch.empty_like(grad, dtype=dtype)


def _setup_context(ctx, inputs, output) -> None:
    self, _dtype = inputs
    ctx.input_dtype = self.dtype


def _autograd(ctx, grad):
    return torch.ops.npu.npu_dtype_cast_backward(grad, ctx.input_dtype), None


_family.define(
    "npu_dtype_cast(Tensor self, ScalarType dtype) -> Tensor",
    kernel=_dtype_cast,
    fake=_dtype_cast_fake,
    backward=_autograd,
    setup_context=_setup_context,
    decompose=True,
)
_family.define(
    "npu_dtype_cast_backward(Tensor grad, ScalarType dtype) -> Tensor",
    kernel=_dtype_cast_backward,
    fake=_dtype_cast_backward_fake,
    decompose=True,
)


def npu_dtype_cast(input: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``input`` as a new tensor of ``dtype``."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"npu_dtype_cast: dtype must be a torch.dtype, got {dtype!r}")
    return torch.ops.npu.npu_dtype_cast(input, dtype)
