"""Rotary position embedding as Ascend LLM code calls it: ``npu_rotary_mul`` (+ backward) and
``npu_apply_rotary_pos_emb``.

Formula (Ascend documentation): ``out = x * cos + rotate(x) * sin`` where ``rotate`` is, for
``rotary_mode="half"``, ``cat(-x2, x1)`` of the two halves of the last dimension, for
``"interleave"``, the pairs ``(x[2i], x[2i+1]) -> (-x[2i+1], x[2i])``, and, when a
``rotate`` matrix is given to ``npu_rotary_mul``, ``x @ rotate``. ``cos``/``sin`` broadcast
to ``x``. Arithmetic is float32, rounded once to ``x``'s dtype.

Backward: ``rotate`` is antisymmetric in both modes, so ``dx = dy*cos - rotate(dy*sin)``;
``dcos``/``dsin`` are ``dy*x`` and ``dy*rotate(x)`` summed to the broadcast shapes of cos
and sin. As on Ascend, there is no backward when a ``rotate`` matrix is given.

``npu_apply_rotary_pos_emb`` rotates query and key in one call and, as documented, updates
them in place and returns them. The ``npu::npu_apply_rotary_pos_emb`` operator itself is
functional (it returns new tensors, which its schema says): PyTorch 2.13 cannot
functionalise a custom operator whose returns alias its inputs, so the in-place update is
a ``copy_`` in ``torch_npu.npu_apply_rotary_pos_emb``, which compiled code fuses into the
rotation kernel.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_rotary_mul", "npu_apply_rotary_pos_emb"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

ROTARY_MODES = ("half", "interleave")
LAYOUTS = ("BSND", "SBND", "BNSD", "TND")


def _rotate(x: torch.Tensor, mode: str) -> torch.Tensor:
    if mode == "half":
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    x1 = x[..., 0::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


# --- npu_rotary_mul -----------------------------------------------------------------------

def _check_rotary_mul_args(op: str, x, r1, r2, rotary_mode, rotate=None) -> None:
    for name, value in (("self", x), ("r1", r1), ("r2", r2)):
        check.tensor(op, name, value)
        check.dtype(op, name, value, check.FLOATING)
        check.rank(op, name, value, (3, 4))
    check.same_dtype(op, "r1", r1, "self", x)
    check.same_dtype(op, "r2", r2, "self", x)
    check.choice(op, "rotary_mode", rotary_mode, ROTARY_MODES)
    check.condition(
        x.shape[-1] % 2 == 0,
        f"{op}: the last dimension of self (D={x.shape[-1]}) must be even",
    )
    check.broadcastable(op, "r1", r1, "self", x)
    check.broadcastable(op, "r2", r2, "self", x)
    if rotate is not None:
        check.tensor(op, "rotate", rotate)
        check.same_dtype(op, "rotate", rotate, "self", x)
        d = x.shape[-1]
        if tuple(rotate.shape) != (d, d):
            raise ValueError(
                f"{op}: rotate must be a ({d}, {d}) matrix for a last dimension of {d}, "
                f"got shape {tuple(rotate.shape)}"
            )


def _rotary_mul(self, r1, r2, rotary_mode: str = "half", rotate=None):
    _check_rotary_mul_args("npu_rotary_mul", self, r1, r2, rotary_mode, rotate)
    x = self.float()
    rotated = x @ rotate.float() if rotate is not None else _rotate(x, rotary_mode)
    return (x * r1.float() + rotated * r2.float()).to(self.dtype).contiguous()


def _rotary_mul_fake(self, r1, r2, rotary_mode: str = "half", rotate=None):
    _check_rotary_mul_args("npu_rotary_mul", self, r1, r2, rotary_mode, rotate)
    return self.new_empty(self.shape)


def _rotary_mul_backward(grad, self, r1, r2, rotary_mode: str = "half"):
    _check_rotary_mul_args("npu_rotary_mul_backward", self, r1, r2, rotary_mode)
    g = grad.float()
    x = self.float()
    dx = g * r1.float() - _rotate(g * r2.float(), rotary_mode)
    dr1 = (g * x).sum_to_size(r1.shape)
    dr2 = (g * _rotate(x, rotary_mode)).sum_to_size(r2.shape)
    dtype = self.dtype
    return dx.to(dtype).contiguous(), dr1.to(dtype).contiguous(), dr2.to(dtype).contiguous()


def _rotary_mul_backward_fake(grad, self, r1, r2, rotary_mode: str = "half"):
    _check_rotary_mul_args("npu_rotary_mul_backward", self, r1, r2, rotary_mode)
    return self.new_empty(self.shape), self.new_empty(r1.shape), self.new_empty(r2.shape)


def _rotary_mul_setup_context(ctx, inputs, output) -> None:
    self, r1, r2, rotary_mode, rotate = inputs
    ctx.rotary_mode = rotary_mode
    ctx.has_rotate = rotate is not None
    ctx.save_for_backward(self, r1, r2)


def _rotary_mul_autograd(ctx, grad):
    if ctx.has_rotate:
        raise RuntimeError(
            "npu_rotary_mul: there is no backward when a rotate matrix is given (as on Ascend); "
            "call it without rotate, using rotary_mode='half' or 'interleave', to train"
        )
    self, r1, r2 = ctx.saved_tensors
    dx, dr1, dr2 = torch.ops.npu.npu_rotary_mul_backward(grad, self, r1, r2, ctx.rotary_mode)
    needs = ctx.needs_input_grad
    return (
        dx if needs[0] else None,
        dr1 if needs[1] else None,
        dr2 if needs[2] else None,
        None,
        None,
    )


_family.define(
    "npu_rotary_mul(Tensor self, Tensor r1, Tensor r2, str rotary_mode='half', "
    "Tensor? rotate=None) -> Tensor",
    kernel=_rotary_mul,
    fake=_rotary_mul_fake,
    backward=_rotary_mul_autograd,
    setup_context=_rotary_mul_setup_context,
    decompose=True,
)
_family.define(
    "npu_rotary_mul_backward(Tensor grad, Tensor self, Tensor r1, Tensor r2, "
    "str rotary_mode='half') -> (Tensor, Tensor, Tensor)",
    kernel=_rotary_mul_backward,
    fake=_rotary_mul_backward_fake,
    decompose=True,
)


# --- npu_apply_rotary_pos_emb ----------------------------------------------------------------

def _check_apply_args(query, key, cos, sin, layout, rotary_mode) -> None:
    op = "npu_apply_rotary_pos_emb"
    check.choice(op, "layout", layout, LAYOUTS)
    check.choice(op, "rotary_mode", rotary_mode, ROTARY_MODES)
    ndim = 3 if layout == "TND" else 4
    for name, value in (("query", query), ("key", key), ("cos", cos), ("sin", sin)):
        check.tensor(op, name, value)
        check.dtype(op, name, value, check.FLOATING)
        if value.dim() != ndim:
            raise ValueError(
                f"{op}: {name} must have {ndim} dimensions for layout {layout!r}, got shape "
                f"{tuple(value.shape)}"
            )
        if name != "query":
            check.same_dtype(op, name, value, "query", query)
    d = query.shape[-1]
    rotary_d = cos.shape[-1]
    check.condition(
        key.shape[-1] == d,
        f"{op}: key's last dimension ({key.shape[-1]}) must equal query's ({d})",
    )
    check.condition(
        sin.shape[-1] == rotary_d,
        f"{op}: sin's last dimension ({sin.shape[-1]}) must equal cos's ({rotary_d})",
    )
    check.condition(
        rotary_d <= d and rotary_d % 2 == 0,
        f"{op}: the last dimension of cos/sin ({rotary_d}) must be even and at most query's "
        f"last dimension ({d})",
    )
    head_dim = 1 if layout == "TND" else layout.index("N")
    for name, value in (("cos", cos), ("sin", sin)):
        check.condition(
            value.shape[head_dim] == 1,
            f"{op}: {name} must have size 1 in the N dimension of layout {layout!r} "
            f"(dimension {head_dim}), got shape {tuple(value.shape)}",
        )
        check.broadcastable(op, name, value, "query", (*query.shape[:-1], rotary_d))
        check.broadcastable(op, name, value, "key", (*key.shape[:-1], rotary_d))


def _rotate_embed(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mode: str) -> torch.Tensor:
    rotary_d = cos.shape[-1]
    x32 = x.float()
    part = x32[..., :rotary_d] if rotary_d != x.shape[-1] else x32
    out = part * cos.float() + _rotate(part, mode) * sin.float()
    if rotary_d != x.shape[-1]:
        out = torch.cat((out, x32[..., rotary_d:]), dim=-1)
    return out.to(x.dtype).contiguous()


def _apply_rotary_pos_emb(query, key, cos, sin, layout: str = "BSND", rotary_mode: str = "half"):
    _check_apply_args(query, key, cos, sin, layout, rotary_mode)
    return _rotate_embed(query, cos, sin, rotary_mode), _rotate_embed(key, cos, sin, rotary_mode)


def _apply_rotary_pos_emb_fake(query, key, cos, sin, layout: str = "BSND", rotary_mode: str = "half"):
    _check_apply_args(query, key, cos, sin, layout, rotary_mode)
    return query.new_empty(query.shape), key.new_empty(key.shape)


_family.define(
    "npu_apply_rotary_pos_emb(Tensor query, Tensor key, Tensor cos, Tensor sin, "
    "str layout='BSND', str rotary_mode='half') -> (Tensor, Tensor)",
    kernel=_apply_rotary_pos_emb,
    fake=_apply_rotary_pos_emb_fake,
    decompose=True,
)


def npu_rotary_mul(input, r1, r2, rotary_mode: str = "half", rotate=None):  # noqa: A002  (Ascend's name)
    """``torch.ops.npu.npu_rotary_mul`` under the Python signature Ascend exports: its first
    parameter is named ``input`` there (``self`` in the operator schema); ``rotate`` is this
    package's optional rotation matrix, after Ascend's parameters."""
    return torch.ops.npu.npu_rotary_mul(input, r1, r2, rotary_mode, rotate)


def npu_apply_rotary_pos_emb(query, key, cos, sin, layout: str = "BSND", rotary_mode: str = "half"):
    """Rotates ``query`` and ``key`` in place (as Ascend documents) and returns them."""
    query_out, key_out = torch.ops.npu.npu_apply_rotary_pos_emb(
        query, key, cos, sin, layout, rotary_mode
    )
    query.copy_(query_out)
    key.copy_(key_out)
    return query, key
