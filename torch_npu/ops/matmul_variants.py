"""Matrix products as Ascend code calls them: ``npu_bmmV2``, ``npu_linear`` (each with the
backward Ascend defines) and ``matmul_checksum`` (Ascend's check of a matmul result against a
hardware fault).

Semantics (Ascend documentation):

* ``npu_bmmV2(self, mat2, output_sizes)``: ``torch.matmul(self, mat2)`` (``output_sizes`` is a
  shape hint for the backward; validated, not needed here). Backward:
  ``npu_bmm_v2_mat1_backward`` / ``npu_bmm_v2_mat2_backward``, the matmul gradients reduced
  to each input's (broadcast) shape.
* ``npu_linear(input, weight, bias)``: ``input @ weight.T + bias``; backward
  ``npu_linear_backward(grad, input, weight) -> (grad @ weight, grad.T @ input)``.
* ``matmul_checksum(a, b, c)``: recomputes the row checksum ``a @ (b @ 1)`` and compares it with
  ``c @ 1``; a 0-d bool tensor, True when some row differs by more than rounding explains
  (an "aicore error"). The bound is eight standard deviations of the sum of the bfloat16
  rounding errors of the row of ``c`` (each uniform within half a unit in the last place,
  ``2**-9`` relative) plus the float32 accumulation error of the checksum. On a healthy card,
  and so here for ``c = a @ b``, it is False. Ascend accepts bfloat16 only.

Products run in the inputs' dtype through ATen, like ``torch.matmul`` on npu.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_bmmV2", "npu_linear", "matmul_checksum"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

MATMUL_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.int32)


# --- npu_bmmV2 -----------------------------------------------------------------------------

def _check_bmm_args(op, a, b) -> list:
    check.tensor(op, "self", a)
    check.tensor(op, "mat2", b)
    check.dtype(op, "self", a, MATMUL_DTYPES)
    check.same_dtype(op, "mat2", b, "self", a)
    if a.dim() < 2 or b.dim() < 2:
        raise ValueError(f"{op}: self and mat2 must have at least 2 dimensions, got {tuple(a.shape)} and {tuple(b.shape)}")
    check.condition(
        a.shape[-1] == b.shape[-2],
        f"{op}: self of shape {tuple(a.shape)} and mat2 of shape {tuple(b.shape)} cannot be multiplied",
    )
    return [*torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1]]


def _bmm(self, mat2, output_sizes):
    _check_bmm_args("npu_bmmV2", self, mat2)
    return torch.matmul(self, mat2)


def _bmm_fake(self, mat2, output_sizes):
    return self.new_empty(_check_bmm_args("npu_bmmV2", self, mat2))


def _reduce_to(grad, size):
    """Sums ``grad`` over the broadcast batch dimensions down to ``size``."""
    lead = grad.dim() - len(size)
    if lead:
        grad = grad.sum(dim=tuple(range(lead)))
    dims = tuple(i for i, s in enumerate(size) if s == 1 and grad.shape[i] != 1)
    return grad.sum(dim=dims, keepdim=True) if dims else grad


def _bmm_mat1_backward(grad, mat1, mat2, size):
    return _reduce_to(torch.matmul(grad, mat2.transpose(-1, -2)), list(size)).contiguous()


def _bmm_mat2_backward(grad, mat1, mat2, size):
    return _reduce_to(torch.matmul(mat1.transpose(-1, -2), grad), list(size)).contiguous()


def _bmm_backward_fake(grad, mat1, mat2, size):
    return grad.new_empty(size)


def _bmm_setup_context(ctx, inputs, output) -> None:
    self, mat2, _sizes = inputs
    ctx.save_for_backward(self, mat2)


def _bmm_autograd(ctx, grad):
    self, mat2 = ctx.saved_tensors
    return (
        torch.ops.npu.npu_bmm_v2_mat1_backward(grad, self, mat2, self.shape) if ctx.needs_input_grad[0] else None,
        torch.ops.npu.npu_bmm_v2_mat2_backward(grad, self, mat2, mat2.shape) if ctx.needs_input_grad[1] else None,
        None,
    )


_family.define("npu_bmmV2(Tensor self, Tensor mat2, int[] output_sizes) -> Tensor", kernel=_bmm, fake=_bmm_fake,
               backward=_bmm_autograd, setup_context=_bmm_setup_context, decompose=True)
_family.define("npu_bmm_v2_mat1_backward(Tensor grad, Tensor mat1, Tensor mat2, SymInt[] size) -> Tensor",
               kernel=_bmm_mat1_backward, fake=_bmm_backward_fake, decompose=True)
_family.define("npu_bmm_v2_mat2_backward(Tensor grad, Tensor mat1, Tensor mat2, SymInt[] size) -> Tensor",
               kernel=_bmm_mat2_backward, fake=_bmm_backward_fake, decompose=True)


# --- npu_linear ----------------------------------------------------------------------------

def _check_linear_args(x, weight, bias) -> list:
    op = "npu_linear"
    check.tensor(op, "input", x)
    check.tensor(op, "weight", weight)
    check.dtype(op, "input", x, MATMUL_DTYPES)
    check.same_dtype(op, "weight", weight, "input", x)
    check.rank(op, "input", x, (2,))
    check.rank(op, "weight", weight, (2,))
    check.condition(
        x.shape[1] == weight.shape[1],
        f"{op}: input of shape {tuple(x.shape)} and weight of shape {tuple(weight.shape)} do not match "
        "(weight is (out_features, in_features))",
    )
    if bias is not None:
        check.tensor(op, "bias", bias)
        if tuple(bias.shape) != (weight.shape[0],):
            raise ValueError(f"{op}: bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}")
    return [x.shape[0], weight.shape[0]]


def _linear(input, weight, bias=None):
    _check_linear_args(input, weight, bias)
    return F.linear(input, weight, bias)


def _linear_fake(input, weight, bias=None):
    return input.new_empty(_check_linear_args(input, weight, bias))


def _linear_backward(grad, input, weight):
    return grad @ weight, grad.t() @ input


def _linear_backward_fake(grad, input, weight):
    return input.new_empty(input.shape), weight.new_empty(weight.shape)


def _linear_setup_context(ctx, inputs, output) -> None:
    input, weight, bias = inputs
    ctx.has_bias = bias is not None
    ctx.save_for_backward(input, weight)


def _linear_autograd(ctx, grad):
    input, weight = ctx.saved_tensors
    grad_input, grad_weight = torch.ops.npu.npu_linear_backward(grad, input, weight)
    return grad_input, grad_weight, grad.sum(0) if ctx.has_bias else None


_family.define("npu_linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", kernel=_linear,
               fake=_linear_fake, backward=_linear_autograd, setup_context=_linear_setup_context, decompose=True)
_family.define("npu_linear_backward(Tensor grad, Tensor input, Tensor weight) -> (Tensor, Tensor)",
               kernel=_linear_backward, fake=_linear_backward_fake, decompose=True)

npu_bmmV2 = torch.ops.npu.npu_bmmV2


def npu_linear(input_, weight, bias=None):
    """``torch.ops.npu.npu_linear`` under the Python signature Ascend exports."""
    return torch.ops.npu.npu_linear(input_, weight, bias)


# --- matmul_checksum -----------------------------------------------------------------------

# bfloat16 rounds to 8 significant bits: a relative error within 2**-9, uniform.
BF16_HALF_ULP = 2.0**-9
STANDARD_DEVIATIONS = 8.0
FLOAT32_ACCUMULATION = 16 * torch.finfo(torch.float32).eps


def matmul_checksum(a, b, c):
    """True (a 0-d bool npu tensor) when ``c`` differs from ``a @ b`` by more than bfloat16
    rounding can explain."""
    op = "matmul_checksum"
    for name, value in (("a", a), ("b", b), ("c", c)):
        check.tensor(op, name, value)
        check.dtype(op, name, value, (torch.bfloat16,))
        if value.device.type != "npu":
            raise ValueError(f"{op}: {name} is on {value.device}; matmul_checksum checks npu results only")
    expected = [*torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1]]
    if a.dim() < 2 or b.dim() < 2 or a.shape[-1] != b.shape[-2] or list(c.shape) != expected:
        raise ValueError(f"{op}: c of shape {tuple(c.shape)} is not the shape of a {tuple(a.shape)} @ b {tuple(b.shape)}")
    a32, b32, c32 = a.float(), b.float(), c.float()
    row_checksum = torch.matmul(a32, b32.sum(-1, keepdim=True)).squeeze(-1)
    magnitude = torch.matmul(a32.abs(), b32.abs().sum(-1, keepdim=True)).squeeze(-1)
    error = (row_checksum - c32.sum(-1)).abs()
    rounding_sd = BF16_HALF_ULP / 3**0.5 * c32.square().sum(-1).sqrt()
    bound = STANDARD_DEVIATIONS * rounding_sd + FLOAT32_ACCUMULATION * magnitude
    return (error > bound).any()
