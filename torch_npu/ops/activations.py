"""Activation functions as Ascend code calls them: ``npu_swiglu``, ``npu_gelu``, ``npu_silu``,
each with the backward Ascend defines.

Formulas (Ascend documentation):

* ``npu_swiglu(x, dim)``: ``A, B = chunk(x, 2, dim)``; ``out = silu(A) * B``. Backward:
  ``dA = dy * B * silu'(A)``, ``dB = dy * silu(A)`` with
  ``silu'(a) = sigmoid(a) * (1 + a * (1 - sigmoid(a)))``.
* ``npu_gelu(x, approximate)``: ``x * Phi(x)`` with the erf form (``"none"``) or the tanh
  approximation (``"tanh"``).
* ``npu_silu(x)``: ``x * sigmoid(x)``; its backward takes the input and the result.

Arithmetic is float32 for float16/bfloat16 inputs, rounded once. Under Inductor each operator
decomposes into this ATen formula and fuses (a compiled ``npu_swiglu`` is one kernel).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_swiglu", "npu_gelu", "npu_silu"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

GELU_APPROXIMATIONS = ("none", "tanh")


# --- npu_swiglu ----------------------------------------------------------------------------

def _check_swiglu_args(op: str, x, dim: int) -> int:
    check.tensor(op, "self", x)
    check.dtype(op, "self", x, check.FLOATING)
    if x.dim() == 0:
        raise ValueError(f"{op}: self must have at least 1 dimension, got a 0-dimensional tensor")
    dim = check.dim_index(op, "dim", dim, x.dim())
    check.condition(
        x.shape[dim] % 2 == 0,
        f"{op}: self's size in dimension dim={dim} ({x.shape[dim]}) must be even: it is split "
        "into two halves",
    )
    return dim


def _swiglu(self, dim: int = -1):
    dim = _check_swiglu_args("npu_swiglu", self, dim)
    a, b = self.float().chunk(2, dim=dim)
    return (F.silu(a) * b).to(self.dtype)


def _swiglu_fake(self, dim: int = -1):
    dim = _check_swiglu_args("npu_swiglu", self, dim)
    shape = list(self.shape)
    shape[dim] = shape[dim] // 2
    return self.new_empty(shape)


def _swiglu_backward(grad_output, self, dim: int = -1):
    dim = _check_swiglu_args("npu_swiglu_backward", self, dim)
    # The halves as a size-2 dimension: [..., 2, h, ...], A at index 0, B at index 1.
    halves = self.float().unflatten(dim, (2, self.shape[dim] // 2))
    a, b = halves.narrow(dim, 0, 1), halves.narrow(dim, 1, 1)
    g = grad_output.float().unsqueeze(dim)
    sig = torch.sigmoid(a)
    silu = a * sig
    grad_a = g * b * sig * (1 + a * (1 - sig))
    grad_b = g * silu
    # A select along the size-2 dimension rather than ``cat``: Inductor turns a ``cat`` of
    # two pointwise inputs into one masked kernel that its C++ backend does not vectorise
    # (compiled forward+backward was slower than eager); this select is one plain pointwise
    # kernel over the gradient, vectorised, with sigmoid(A) computed once per element pair.
    first = torch.arange(2, device=self.device).view([2] + [1] * (self.dim() - dim)) == 0
    return torch.where(first, grad_a, grad_b).flatten(dim, dim + 1).to(self.dtype)


def _swiglu_backward_fake(grad_output, self, dim: int = -1):
    _check_swiglu_args("npu_swiglu_backward", self, dim)
    return self.new_empty(self.shape)


def _swiglu_setup_context(ctx, inputs, output) -> None:
    self, dim = inputs
    ctx.dim = dim
    ctx.save_for_backward(self)


def _swiglu_autograd(ctx, grad):
    (self,) = ctx.saved_tensors
    return torch.ops.npu.npu_swiglu_backward(grad, self, ctx.dim), None


_family.define(
    "npu_swiglu(Tensor self, int dim=-1) -> Tensor",
    kernel=_swiglu,
    fake=_swiglu_fake,
    backward=_swiglu_autograd,
    setup_context=_swiglu_setup_context,
    decompose=True,
)
_family.define(
    "npu_swiglu_backward(Tensor grad_output, Tensor self, int dim=-1) -> Tensor",
    kernel=_swiglu_backward,
    fake=_swiglu_backward_fake,
    decompose=True,
)


# --- npu_gelu ------------------------------------------------------------------------------

def _check_gelu_args(op: str, x, approximate: str) -> None:
    check.tensor(op, "self", x)
    check.dtype(op, "self", x, check.FLOATING)
    check.choice(op, "approximate", approximate, GELU_APPROXIMATIONS)


def _gelu(self, *, approximate: str = "none"):
    _check_gelu_args("npu_gelu", self, approximate)
    return F.gelu(self.float(), approximate=approximate).to(self.dtype)


def _gelu_fake(self, *, approximate: str = "none"):
    _check_gelu_args("npu_gelu", self, approximate)
    return torch.empty_like(self)


def _gelu_backward(grad_output, self, *, approximate: str = "none"):
    _check_gelu_args("npu_gelu_backward", self, approximate)
    grad = torch.ops.aten.gelu_backward(grad_output.float(), self.float(), approximate=approximate)
    return grad.to(self.dtype)


def _gelu_backward_fake(grad_output, self, *, approximate: str = "none"):
    _check_gelu_args("npu_gelu_backward", self, approximate)
    return torch.empty_like(self)


def _gelu_setup_context(ctx, inputs, keyword_only_inputs, output) -> None:
    (self,) = inputs
    ctx.approximate = keyword_only_inputs.get("approximate", "none")
    ctx.save_for_backward(self)


def _gelu_autograd(ctx, grad):
    (self,) = ctx.saved_tensors
    return torch.ops.npu.npu_gelu_backward(grad, self, approximate=ctx.approximate)


_family.define(
    "npu_gelu(Tensor self, *, str approximate='none') -> Tensor",
    kernel=_gelu,
    fake=_gelu_fake,
    backward=_gelu_autograd,
    setup_context=_gelu_setup_context,
    decompose=True,
)
_family.define(
    "npu_gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor",
    kernel=_gelu_backward,
    fake=_gelu_backward_fake,
    decompose=True,
)


# --- npu_silu ------------------------------------------------------------------------------

def _check_silu_args(op: str, x) -> None:
    check.tensor(op, "self", x)
    check.dtype(op, "self", x, check.FLOATING)


def _silu(self):
    _check_silu_args("npu_silu", self)
    return F.silu(self.float()).to(self.dtype)


def _silu_fake(self):
    _check_silu_args("npu_silu", self)
    return torch.empty_like(self)


def _silu_backward(grad_output, x0, x1):
    _check_silu_args("npu_silu_backward", x0)
    sig = torch.sigmoid(x0.float())
    grad = grad_output.float() * (sig + x1.float() * (1 - sig))
    return grad.to(x0.dtype)


def _silu_backward_fake(grad_output, x0, x1):
    _check_silu_args("npu_silu_backward", x0)
    return torch.empty_like(grad_output)


def _silu_setup_context(ctx, inputs, output) -> None:
    (self,) = inputs
    ctx.save_for_backward(self, output)


def _silu_autograd(ctx, grad):
    self, result = ctx.saved_tensors
    return torch.ops.npu.npu_silu_backward(grad, self, result)


_family.define(
    "npu_silu(Tensor self) -> Tensor",
    kernel=_silu,
    fake=_silu_fake,
    backward=_silu_autograd,
    setup_context=_silu_setup_context,
    decompose=True,
)
_family.define(
    "npu_silu_backward(Tensor grad_output, Tensor x0, Tensor x1) -> Tensor",
    kernel=_silu_backward,
    fake=_silu_backward_fake,
    decompose=True,
)

npu_swiglu = torch.ops.npu.npu_swiglu


def npu_gelu(x, approximate="none"):
    """``torch.ops.npu.npu_gelu`` under the Python signature Ascend exports (``approximate``
    may be passed by position there)."""
    return torch.ops.npu.npu_gelu(x, approximate=approximate)


npu_silu = torch.ops.npu.npu_silu
