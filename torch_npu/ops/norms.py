"""RMS normalisation as Ascend LLM code calls it: ``npu_rms_norm`` (+ backward), ``npu_add_rms_norm``.

Formula (Ascend documentation): over the trailing ``gamma.dim()`` dimensions of ``x``,
``rstd = 1 / sqrt(mean(x**2) + epsilon)`` and ``y = x * rstd * gamma``. ``rstd`` is returned
in float32 with the normalised dimensions kept as size 1; ``y`` has ``x``'s dtype. The
arithmetic is done in float32 whatever the input dtype, and rounded once at the end.
``npu_add_rms_norm`` normalises ``x1 + x2`` and also returns that sum (the residual), as
Ascend does; Ascend defines no backward for it.

Under Inductor each operator decomposes into its ATen formula, so a compiled
``npu_rms_norm`` is one fused kernel (a row reduction and the scaling in one loop nest).
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_rms_norm", "npu_add_rms_norm"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

# Ascend pairs x with gamma of the same dtype, or a float16/bfloat16 x with a float32 gamma.
_GAMMA_DTYPES = {
    torch.float16: (torch.float16, torch.float32),
    torch.bfloat16: (torch.bfloat16, torch.float32),
    torch.float32: (torch.float32,),
}


def _check_norm_args(op: str, x: torch.Tensor, x_name: str, gamma: torch.Tensor) -> tuple[int, ...]:
    """Validates x and gamma; returns the normalised dimensions of x."""
    check.tensor(op, x_name, x)
    check.tensor(op, "gamma", gamma)
    check.dtype(op, x_name, x, check.FLOATING)
    check.dtype(op, "gamma", gamma, _GAMMA_DTYPES[x.dtype])
    if gamma.dim() == 0 or gamma.dim() > x.dim():
        raise ValueError(
            f"{op}: gamma must have between 1 and {x.dim()} dimensions (the trailing dimensions "
            f"of {x_name}, shape {tuple(x.shape)}), got shape {tuple(gamma.shape)}"
        )
    lead = x.dim() - gamma.dim()
    if tuple(x.shape[lead:]) != tuple(gamma.shape):
        raise ValueError(
            f"{op}: gamma of shape {tuple(gamma.shape)} must equal the trailing dimensions of "
            f"{x_name} (shape {tuple(x.shape)}), i.e. {tuple(x.shape[lead:])}"
        )
    return tuple(range(lead, x.dim()))


def _rstd_shape(x: torch.Tensor, gamma: torch.Tensor) -> list:
    lead = x.dim() - gamma.dim()
    return list(x.shape[:lead]) + [1] * gamma.dim()


def _normalise(x32: torch.Tensor, gamma: torch.Tensor, dims: tuple[int, ...], epsilon: float, dtype):
    mean_square = x32.square().mean(dims, keepdim=True)
    rstd = torch.rsqrt(mean_square + epsilon)
    # y takes its own 1/sqrt of the row statistic instead of reading rstd. Under Inductor a
    # consumer of the rstd buffer waits for the per-row rstd loop, which cannot share the
    # row loop, so y would re-read x from memory in a loop of its own; computed from the
    # statistic, y fuses with the reduction (one pass over each row) and rstd is a small
    # loop over the rows. It is spelt reciprocal(sqrt) so that the graph's common
    # subexpression elimination (run on training graphs) does not merge it back into rstd;
    # rsqrt is 1/sqrt in ATen's and Inductor's C++ kernels, so the values are the same.
    scale = torch.reciprocal(torch.sqrt(mean_square + epsilon))
    # Contiguous, as the fake kernel says, whatever the strides of x.
    y = (x32 * scale * gamma.float()).to(dtype).contiguous()
    return y, rstd


# --- npu_rms_norm -----------------------------------------------------------------------

def _rms_norm(self: torch.Tensor, gamma: torch.Tensor, epsilon: float = 1e-6):
    dims = _check_norm_args("npu_rms_norm", self, "self", gamma)
    return _normalise(self.float(), gamma, dims, epsilon, self.dtype)


def _rms_norm_fake(self: torch.Tensor, gamma: torch.Tensor, epsilon: float = 1e-6):
    _check_norm_args("npu_rms_norm", self, "self", gamma)
    return (
        self.new_empty(self.shape),
        self.new_empty(_rstd_shape(self, gamma), dtype=torch.float32),
    )


def _rms_norm_backward(dy: torch.Tensor, self: torch.Tensor, gamma: torch.Tensor, rstd: torch.Tensor):
    dims = _check_norm_args("npu_rms_norm_backward", self, "self", gamma)
    check.condition(
        tuple(dy.shape) == tuple(self.shape),
        f"npu_rms_norm_backward: dy of shape {tuple(dy.shape)} must have the shape of self "
        f"{tuple(self.shape)}",
    )
    x_hat = self.float() * rstd
    dy_gamma = dy.float() * gamma.float()
    dx = rstd * (dy_gamma - x_hat * (dy_gamma * x_hat).mean(dims, keepdim=True))
    dgamma = dy.float() * x_hat
    lead = tuple(range(self.dim() - gamma.dim()))
    if lead:
        dgamma = dgamma.sum(lead)
    return dx.to(self.dtype).contiguous(), dgamma


def _rms_norm_backward_fake(dy, self, gamma, rstd):
    _check_norm_args("npu_rms_norm_backward", self, "self", gamma)
    return self.new_empty(self.shape), gamma.new_empty(gamma.shape, dtype=torch.float32)


def _rms_norm_setup_context(ctx, inputs, output) -> None:
    self, gamma, _epsilon = inputs
    _y, rstd = output
    ctx.mark_non_differentiable(rstd)
    ctx.save_for_backward(self, gamma, rstd)


def _rms_norm_autograd(ctx, dy, _drstd):
    self, gamma, rstd = ctx.saved_tensors
    dx, dgamma = torch.ops.npu.npu_rms_norm_backward(dy, self, gamma, rstd)
    return (
        dx if ctx.needs_input_grad[0] else None,
        dgamma.to(gamma.dtype) if ctx.needs_input_grad[1] else None,
        None,
    )


_family.define(
    "npu_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
    kernel=_rms_norm,
    fake=_rms_norm_fake,
    backward=_rms_norm_autograd,
    setup_context=_rms_norm_setup_context,
    decompose=True,
)
_family.define(
    "npu_rms_norm_backward(Tensor dy, Tensor self, Tensor gamma, Tensor rstd) -> (Tensor, Tensor)",
    kernel=_rms_norm_backward,
    fake=_rms_norm_backward_fake,
    decompose=True,
)


# --- npu_add_rms_norm -------------------------------------------------------------------

def _check_add_args(x1: torch.Tensor, x2: torch.Tensor, gamma: torch.Tensor) -> tuple[int, ...]:
    op = "npu_add_rms_norm"
    check.tensor(op, "x2", x2)
    dims = _check_norm_args(op, x1, "x1", gamma)
    check.same_dtype(op, "x2", x2, "x1", x1)
    check.condition(
        tuple(x2.shape) == tuple(x1.shape),
        f"{op}: x2 of shape {tuple(x2.shape)} must have the shape of x1 {tuple(x1.shape)}",
    )
    return dims


def _add_rms_norm(x1: torch.Tensor, x2: torch.Tensor, gamma: torch.Tensor, epsilon: float = 1e-6):
    dims = _check_add_args(x1, x2, gamma)
    x32 = x1.float() + x2.float()
    y, rstd = _normalise(x32, gamma, dims, epsilon, x1.dtype)
    return y, rstd, x32.to(x1.dtype).contiguous()


def _add_rms_norm_fake(x1, x2, gamma, epsilon: float = 1e-6):
    _check_add_args(x1, x2, gamma)
    return (
        x1.new_empty(x1.shape),
        x1.new_empty(_rstd_shape(x1, gamma), dtype=torch.float32),
        x1.new_empty(x1.shape),
    )


_family.define(
    "npu_add_rms_norm(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) "
    "-> (Tensor, Tensor, Tensor)",
    kernel=_add_rms_norm,
    fake=_add_rms_norm_fake,
    decompose=True,
)

npu_rms_norm = torch.ops.npu.npu_rms_norm
npu_add_rms_norm = torch.ops.npu.npu_add_rms_norm
