"""The GELU variants Ascend code calls beyond ``npu_gelu``: the gated ``npu_geglu`` (diffusers'
GEGLU calls it whenever torch_npu is installed) and the sigmoid approximation ``npu_fast_gelu``
(also spelt ``fast_gelu``), each with the backward Ascend defines.

Formulas (Ascend documentation):

* ``npu_geglu(self, dim, approximate, activate_left)``: ``self`` is split in two halves along
  ``dim``; the gate is the second half (the first with ``activate_left=True``), the other
  half is the linear input. ``gelu = GELU(gate)`` with the erf form (``approximate=0``) or
  the tanh form (``approximate=1``); the result is ``(linear * gelu, gelu)``. Only the first
  output is differentiable (Ascend's derivative table); ``npu_geglu_grad`` is its backward.
* ``npu_fast_gelu(x)``: ``x / (1 + exp(-1.702|x|)) * exp(0.851 (x - |x|))``, which is the
  same function as ``x * sigmoid(1.702 x)`` (written so here: one exp, no overflow).

Arithmetic is float32 for float16/bfloat16 inputs, rounded once. Under Inductor each operator
decomposes into this ATen formula and fuses with its neighbours.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_geglu", "npu_fast_gelu", "fast_gelu"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

# Ascend's integer code for the GELU form -> torch's ``approximate`` string.
GEGLU_APPROXIMATIONS = {0: "none", 1: "tanh"}
FAST_GELU_SLOPE = 1.702


# --- npu_geglu -----------------------------------------------------------------------------

def _check_geglu_args(op: str, x, dim: int, approximate: int) -> int:
    check.tensor(op, "self", x)
    check.dtype(op, "self", x, check.FLOATING)
    check.choice(op, "approximate", approximate, tuple(GEGLU_APPROXIMATIONS))
    if x.dim() == 0:
        raise ValueError(f"{op}: self must have at least 1 dimension, got a 0-dimensional tensor")
    dim = check.dim_index(op, "dim", dim, x.dim())
    check.condition(
        x.shape[dim] % 2 == 0,
        f"{op}: self's size in dimension dim={dim} ({x.shape[dim]}) must be even: it is split "
        "into the gate and the linear half",
    )
    return dim


def _gate_and_linear(x32: torch.Tensor, dim: int, activate_left: bool):
    first, second = x32.chunk(2, dim=dim)
    return (first, second) if activate_left else (second, first)


def _geglu(self, dim: int = -1, approximate: int = 1, activate_left: bool = False):
    dim = _check_geglu_args("npu_geglu", self, dim, approximate)
    gate, linear = _gate_and_linear(self.float(), dim, activate_left)
    gelu = F.gelu(gate, approximate=GEGLU_APPROXIMATIONS[approximate])
    return (linear * gelu).to(self.dtype), gelu.to(self.dtype)


def _geglu_fake(self, dim: int = -1, approximate: int = 1, activate_left: bool = False):
    dim = _check_geglu_args("npu_geglu", self, dim, approximate)
    shape = list(self.shape)
    shape[dim] = shape[dim] // 2
    return self.new_empty(shape), self.new_empty(shape)


def _geglu_grad(grad_output, self, gelu, dim: int = -1, approximate: int = 1,
                activate_left: bool = False):
    dim = _check_geglu_args("npu_geglu_grad", self, dim, approximate)
    check.tensor("npu_geglu_grad", "grad_output", grad_output)
    check.tensor("npu_geglu_grad", "gelu", gelu)
    gate, linear = _gate_and_linear(self.float(), dim, activate_left)
    dy = grad_output.float()
    grad_linear = dy * gelu.float()
    grad_gate = torch.ops.aten.gelu_backward(
        dy * linear, gate, approximate=GEGLU_APPROXIMATIONS[approximate]
    )
    halves = (grad_gate, grad_linear) if activate_left else (grad_linear, grad_gate)
    return torch.cat(halves, dim=dim).to(self.dtype)


def _geglu_grad_fake(grad_output, self, gelu, dim: int = -1, approximate: int = 1,
                     activate_left: bool = False):
    _check_geglu_args("npu_geglu_grad", self, dim, approximate)
    return self.new_empty(self.shape)


def _geglu_setup_context(ctx, inputs, output) -> None:
    self, dim, approximate, activate_left = inputs
    _y, gelu = output
    ctx.mark_non_differentiable(gelu)
    ctx.options = (dim, approximate, activate_left)
    ctx.save_for_backward(self, gelu)


def _geglu_autograd(ctx, grad, _grad_gelu):
    self, gelu = ctx.saved_tensors
    return torch.ops.npu.npu_geglu_grad(grad, self, gelu, *ctx.options), None, None, None


_family.define(
    "npu_geglu(Tensor self, int dim=-1, int approximate=1, bool activate_left=False) "
    "-> (Tensor, Tensor)",
    kernel=_geglu,
    fake=_geglu_fake,
    backward=_geglu_autograd,
    setup_context=_geglu_setup_context,
    decompose=True,
)
_family.define(
    "npu_geglu_grad(Tensor grad_output, Tensor self, Tensor gelu, int dim=-1, int approximate=1, "
    "bool activate_left=False) -> Tensor",
    kernel=_geglu_grad,
    fake=_geglu_grad_fake,
    decompose=True,
)


# --- npu_fast_gelu / fast_gelu -------------------------------------------------------------

def _check_fast_gelu_args(op: str, x) -> None:
    check.tensor(op, "self", x)
    check.dtype(op, "self", x, check.FLOATING)


def _fast_gelu_named(op: str):
    def kernel(self):
        _check_fast_gelu_args(op, self)
        x = self.float()
        return (x * torch.sigmoid(FAST_GELU_SLOPE * x)).to(self.dtype)

    return kernel


def _fast_gelu_fake_named(op: str):
    def fake(self):
        _check_fast_gelu_args(op, self)
        return torch.empty_like(self)

    return fake


def _fast_gelu_backward(grad, self):
    _check_fast_gelu_args("npu_fast_gelu_backward", self)
    x = self.float()
    sig = torch.sigmoid(FAST_GELU_SLOPE * x)
    return (grad.float() * (sig + FAST_GELU_SLOPE * x * sig * (1 - sig))).to(self.dtype)


def _fast_gelu_backward_fake(grad, self):
    _check_fast_gelu_args("npu_fast_gelu_backward", self)
    return torch.empty_like(self)


def _fast_gelu_setup_context(ctx, inputs, output) -> None:
    ctx.save_for_backward(inputs[0])


def _fast_gelu_autograd(ctx, grad):
    (self,) = ctx.saved_tensors
    return torch.ops.npu.npu_fast_gelu_backward(grad, self)


for _name in ("npu_fast_gelu", "fast_gelu"):
    _family.define(
        f"{_name}(Tensor self) -> Tensor",
        kernel=_fast_gelu_named(_name),
        fake=_fast_gelu_fake_named(_name),
        backward=_fast_gelu_autograd,
        setup_context=_fast_gelu_setup_context,
        decompose=True,
    )
_family.define(
    "npu_fast_gelu_backward(Tensor grad, Tensor self) -> Tensor",
    kernel=_fast_gelu_backward,
    fake=_fast_gelu_backward_fake,
    decompose=True,
)

npu_geglu = torch.ops.npu.npu_geglu
npu_fast_gelu = torch.ops.npu.npu_fast_gelu
fast_gelu = torch.ops.npu.fast_gelu
