"""Dequantisation as Ascend inference code calls it: ``npu_anti_quant`` (integers back to
floating point) and ``npu_weight_quant_batchmatmul`` (a matmul with an int8 or packed-int4
weight dequantised on the fly).

Formulas (Ascend documentation):

* ``npu_anti_quant(x, scale, offset, dst_dtype, src_dtype)``: ``(x + offset) * scale`` (or
  ``x * scale``), ``scale``/``offset`` of shape ``(n,)`` running along the last dimension (or
  one value); ``x`` is int8, or int32 holding eight int4 values (``src_dtype=torch.quint4x2``);
  the result is ``dst_dtype`` (float16 by default, or bfloat16).
* ``npu_weight_quant_batchmatmul(x, weight, antiquant_scale, antiquant_offset, quant_scale,
  quant_offset, bias, antiquant_group_size)``: ``y = x @ ((weight + antiquant_offset) *
  antiquant_scale) + bias`` with per-tensor ``(1,)``, per-channel ``(N,)``/``(1, N)`` or, with
  ``antiquant_group_size = G``, per-group ``(ceil(K / G), N)`` scales (rows ``g*G .. g*G+G-1``
  of the weight use scale row ``g``); with ``quant_scale`` the result is quantised to int8:
  ``round(y * quant_scale + quant_offset)``. Otherwise ``y`` has ``x``'s dtype.

Arithmetic is float32 (the dequantised weight and the product), rounded once.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops import _int4
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_anti_quant", "npu_weight_quant_batchmatmul"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

HALF_DTYPES = (torch.float16, torch.bfloat16)


def _values(x: torch.Tensor) -> torch.Tensor:
    """The integer values of int8 ``x`` or of int32 ``x`` holding packed int4."""
    return _int4.unpack(x) if x.dtype == torch.int32 else x


def _values_width(x: torch.Tensor) -> int:
    return x.shape[-1] * (_int4.VALUES_PER_WORD if x.dtype == torch.int32 else 1)


# --- npu_anti_quant ------------------------------------------------------------------------

def _check_anti_quant_args(x, scale, offset, dst_dtype, src_dtype) -> torch.dtype:
    op = "npu_anti_quant"
    check.tensor(op, "x", x)
    check.tensor(op, "scale", scale)
    check.dtype(op, "x", x, (torch.int8, torch.int32))
    if src_dtype is not None:
        check.choice(op, "src_dtype", src_dtype, (torch.int8, torch.quint4x2))
        expected = torch.int8 if src_dtype == torch.int8 else torch.int32
        if x.dtype != expected:
            raise TypeError(f"{op}: src_dtype={src_dtype} needs x of dtype {expected}, got {x.dtype}")
    dst_dtype = torch.float16 if dst_dtype is None else dst_dtype
    check.choice(op, "dst_dtype", dst_dtype, HALF_DTYPES)
    check.dtype(op, "scale", scale, (torch.float32, torch.bfloat16))
    if x.dim() == 0:
        raise ValueError(f"{op}: x must have at least 1 dimension")
    width = _values_width(x)
    if scale.dim() != 1 or scale.shape[0] not in (1, width):
        raise ValueError(f"{op}: scale must have shape (1,) or ({width},) (x's last dimension in values), got {tuple(scale.shape)}")
    if offset is not None:
        check.tensor(op, "offset", offset)
        check.same_dtype(op, "offset", offset, "scale", scale)
        if tuple(offset.shape) != tuple(scale.shape):
            raise ValueError(f"{op}: offset must have scale's shape {tuple(scale.shape)}, got {tuple(offset.shape)}")
    return dst_dtype


def _anti_quant(x, scale, *, offset=None, dst_dtype=None, src_dtype=None):
    dst_dtype = _check_anti_quant_args(x, scale, offset, dst_dtype, src_dtype)
    values = _values(x).float()
    if offset is not None:
        values = values + offset.float()
    return (values * scale.float()).to(dst_dtype)


def _anti_quant_fake(x, scale, *, offset=None, dst_dtype=None, src_dtype=None):
    dst_dtype = _check_anti_quant_args(x, scale, offset, dst_dtype, src_dtype)
    return x.new_empty((*x.shape[:-1], _values_width(x)), dtype=dst_dtype)


_family.define(
    "npu_anti_quant(Tensor x, Tensor scale, *, Tensor? offset=None, ScalarType? dst_dtype=None, "
    "ScalarType? src_dtype=None) -> Tensor",
    kernel=_anti_quant,
    fake=_anti_quant_fake,
    decompose=True,
)


def npu_anti_quant(x, scale, offset=None, dst_dtype=None, src_dtype=None):
    """``torch.ops.npu.npu_anti_quant`` under the Python signature Ascend exports."""
    return torch.ops.npu.npu_anti_quant(x, scale, offset=offset, dst_dtype=dst_dtype, src_dtype=src_dtype)


# --- npu_weight_quant_batchmatmul ----------------------------------------------------------

def _check_wqbmm_args(x, weight, antiquant_scale, antiquant_offset, quant_scale, quant_offset, bias,
                      antiquant_group_size) -> tuple[int, int, int]:
    op = "npu_weight_quant_batchmatmul"
    for name, value in (("x", x), ("weight", weight), ("antiquant_scale", antiquant_scale)):
        check.tensor(op, name, value)
    check.dtype(op, "x", x, HALF_DTYPES)
    check.dtype(op, "weight", weight, (torch.int8, torch.int32))
    if antiquant_scale.dtype == torch.int64:
        raise TypeError(
            f"{op}: antiquant_scale has dtype int64 (the packed form made by npu_trans_quant_param), "
            "which the simulated npu does not read; pass the floating-point scale itself"
        )
    check.same_dtype(op, "antiquant_scale", antiquant_scale, "x", x)
    check.rank(op, "x", x, (2,))
    check.rank(op, "weight", weight, (2,))
    m, k = x.shape
    n = _values_width(weight)
    check.condition(
        weight.shape[0] == k,
        f"{op}: x of shape {tuple(x.shape)} and weight of shape {tuple(weight.shape)} cannot be "
        f"multiplied (k={k} vs {weight.shape[0]})",
    )
    if antiquant_group_size:
        if antiquant_group_size % 32 or not 32 <= antiquant_group_size <= k - 1:
            raise ValueError(
                f"{op}: antiquant_group_size={antiquant_group_size} must be a multiple of 32 in "
                f"[32, k - 1] (k={k})"
            )
        groups = -(-k // antiquant_group_size)
        allowed = ((groups, n),)
    else:
        allowed = ((1,), (1, 1), (n,), (1, n))
    if tuple(antiquant_scale.shape) not in allowed:
        raise ValueError(
            f"{op}: antiquant_scale must have shape {' or '.join(str(s) for s in allowed)}, got "
            f"{tuple(antiquant_scale.shape)}"
        )
    if antiquant_offset is not None:
        check.tensor(op, "antiquant_offset", antiquant_offset)
        if tuple(antiquant_offset.shape) != tuple(antiquant_scale.shape):
            raise ValueError(f"{op}: antiquant_offset must have antiquant_scale's shape {tuple(antiquant_scale.shape)}, got {tuple(antiquant_offset.shape)}")
    if quant_offset is not None and quant_scale is None:
        raise ValueError(f"{op}: quant_offset is given without quant_scale; pass both or neither")
    for name, value in (("quant_scale", quant_scale), ("quant_offset", quant_offset), ("bias", bias)):
        if value is not None:
            check.tensor(op, name, value)
            if value.numel() not in (1, n) or value.dim() > 2:
                raise ValueError(f"{op}: {name} must have shape (n,) or (1, n) with n={n}, got {tuple(value.shape)}")
    if quant_scale is not None:
        check.dtype(op, "quant_scale", quant_scale, (torch.float32,))
    return m, k, n


def _dequantised_weight(weight, scale, offset, group_size) -> torch.Tensor:
    w = _values(weight).float()
    s = scale.float()
    o = None if offset is None else offset.float()
    if group_size:
        rows = torch.arange(w.shape[0], device=w.device) // group_size
        s = s[rows]
        o = None if o is None else o[rows]
    else:
        s = s.reshape(1, -1)
        o = None if o is None else o.reshape(1, -1)
    return (w if o is None else w + o) * s


def _weight_quant_batchmatmul(x, weight, antiquant_scale, antiquant_offset=None, quant_scale=None,
                              quant_offset=None, bias=None, antiquant_group_size=0, inner_precise=0,
                              weight_dtype=None):
    _check_wqbmm_args(x, weight, antiquant_scale, antiquant_offset, quant_scale, quant_offset, bias,
                      antiquant_group_size)
    y = x.float() @ _dequantised_weight(weight, antiquant_scale, antiquant_offset, antiquant_group_size)
    if bias is not None:
        y = y + bias.float().reshape(-1)
    if quant_scale is None:
        return y.to(x.dtype)
    y = y * quant_scale.float().reshape(-1)
    if quant_offset is not None:
        y = y + quant_offset.float().reshape(-1)
    return torch.round(y).clamp(-128, 127).to(torch.int8)


def _weight_quant_batchmatmul_fake(x, weight, antiquant_scale, antiquant_offset=None, quant_scale=None,
                                   quant_offset=None, bias=None, antiquant_group_size=0, inner_precise=0,
                                   weight_dtype=None):
    m, _k, n = _check_wqbmm_args(x, weight, antiquant_scale, antiquant_offset, quant_scale, quant_offset,
                                 bias, antiquant_group_size)
    return x.new_empty((m, n), dtype=x.dtype if quant_scale is None else torch.int8)


_family.define(
    "npu_weight_quant_batchmatmul(Tensor x, Tensor weight, Tensor antiquant_scale, "
    "Tensor? antiquant_offset=None, Tensor? quant_scale=None, Tensor? quant_offset=None, "
    "Tensor? bias=None, int antiquant_group_size=0, int inner_precise=0, int? weight_dtype=None) -> Tensor",
    kernel=_weight_quant_batchmatmul,
    fake=_weight_quant_batchmatmul_fake,
)


def npu_weight_quant_batchmatmul(x, weight, antiquant_scale, antiquant_offset=None, quant_scale=None,
                                 quant_offset=None, bias=None, antiquant_group_size=0, inner_precise=0):
    """``torch.ops.npu.npu_weight_quant_batchmatmul`` under the Python signature Ascend exports."""
    return torch.ops.npu.npu_weight_quant_batchmatmul(
        x, weight, antiquant_scale, antiquant_offset, quant_scale, quant_offset, bias,
        antiquant_group_size, inner_precise,
    )
