"""Quantisation beyond per-token symmetric, as Ascend inference code calls it:
``npu_quantize`` (per-channel with zero points), ``npu_group_quant`` (a scale per group of
rows) and ``npu_dynamic_quant_asymmetric`` (per-token with a computed offset).

Formulas (Ascend documentation); rounding is half to even and results saturate to the
target type (int8 ``[-128, 127]``, uint8 ``[0, 255]``, int4 ``[-8, 7]`` packed eight to an
int32, see ``_int4``):

* ``npu_quantize(input, scales, zero_points, dtype, axis, div_mode)``: ``input / scales +
  zero_points`` (``div_mode=True``) or ``input * scales + zero_points``; ``scales`` runs
  along dimension ``axis`` (with ``div_mode=False``: the second-to-last dimension for
  ``axis=-2``, the last one otherwise). ``dtype`` is ``torch.qint8``, ``torch.quint8``,
  ``torch.qint32`` (int8/uint8/int32 results) or ``torch.quint4x2``.
* ``npu_group_quant(x, scale, group_index, offset, dst_dtype)``: ``x (S, H)``; row ``s`` uses
  ``scale[g]`` for the group ``g`` holding it, ``group_index`` being the groups' cumulative
  row ends; ``y = round(x * scale[g] + offset)``.
* ``npu_dynamic_quant_asymmetric(x, smooth_scales, group_index, dst_type)``: per row,
  ``scale = (max - min) / (DST_MAX - DST_MIN)``, ``offset = DST_MAX - max / scale``,
  ``y = round(x / scale + offset)``; smooth scales as in ``npu_dynamic_quant``. A constant row
  (``scale = 0``) is divided by 1 instead.

Arithmetic is float32. ``torch_npu.<name>`` keeps the Python signatures Ascend exports
(positional options; ``dtype`` values are torch dtypes); the operators carry Ascend's schemas.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops import _int4
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_quantize", "npu_group_quant", "npu_dynamic_quant_asymmetric"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

# target dtype -> (storage dtype, min, max)
_TARGETS = {
    torch.qint8: (torch.int8, -128, 127),
    torch.int8: (torch.int8, -128, 127),
    torch.quint8: (torch.uint8, 0, 255),
    torch.uint8: (torch.uint8, 0, 255),
    torch.qint32: (torch.int32, -(2**31), 2**31 - 1),
    torch.int32: (torch.int32, -(2**31), 2**31 - 1),
    torch.quint4x2: (torch.int32, _int4.MIN, _int4.MAX),
}


def _saturate(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    storage, low, high = _TARGETS[dtype]
    if storage == torch.int32 and dtype != torch.quint4x2:
        values = values.double()  # int32's bounds are not float32 values
    y = torch.round(values).clamp(low, high)
    if dtype == torch.quint4x2:
        return _int4.pack(y)
    return y.to(storage)


def _result_shape(x_shape, dtype) -> list:
    shape = list(x_shape)
    if dtype == torch.quint4x2:
        shape[-1] = shape[-1] // _int4.VALUES_PER_WORD
    return shape


def _check_int4_width(op: str, name: str, x, dtype) -> None:
    if dtype == torch.quint4x2:
        check.condition(
            x.shape[-1] % _int4.VALUES_PER_WORD == 0,
            f"{op}: with an int4 result the last dimension of {name} ({x.shape[-1]}) must be a "
            "multiple of 8 (eight int4 values are packed per int32)",
        )


# --- npu_quantize --------------------------------------------------------------------------

def _quant_axis(x, axis: int, div_mode: bool) -> int:
    if not div_mode:
        return x.dim() - 2 if axis == -2 else x.dim() - 1
    return check.dim_index("npu_quantize", "axis", axis, x.dim())


def _check_quantize_args(x, scales, zero_points, dtype, axis, div_mode) -> int:
    op = "npu_quantize"
    check.tensor(op, "input", x)
    check.tensor(op, "scales", scales)
    check.dtype(op, "input", x, check.FLOATING)
    allowed = (torch.qint8, torch.quint8, torch.qint32, torch.int32) if div_mode else (torch.qint8, torch.quint4x2)
    check.choice(op, "dtype", dtype, allowed)
    if x.dim() == 0:
        raise ValueError(f"{op}: input must have at least 1 dimension")
    if not div_mode and axis < -2:
        raise ValueError(f"{op}: with div_mode=False axis={axis} must be at least -2")
    dim = _quant_axis(x, axis, div_mode)
    _check_int4_width(op, "input", x, dtype)
    for name, value in (("scales", scales), ("zero_points", zero_points)):
        if value is None:
            continue
        check.tensor(op, name, value)
        if value.numel() not in (1, x.shape[dim]) or (value.dim() > 1 and value.dim() != x.dim()):
            raise ValueError(
                f"{op}: {name} must have 1 or {x.shape[dim]} elements along input's dimension "
                f"{dim} (axis={axis}), got shape {tuple(value.shape)}"
            )
    return dim


def _along(value: torch.Tensor, x: torch.Tensor, dim: int) -> torch.Tensor:
    shape = [1] * x.dim()
    shape[dim] = -1
    return value.float().reshape(shape)


def _quantize(self, scales, zero_points, dtype, axis: int = 1, div_mode: bool = True):
    dim = _check_quantize_args(self, scales, zero_points, dtype, axis, div_mode)
    x = self.float()
    s = _along(scales, self, dim)
    y = x / s if div_mode else x * s
    if zero_points is not None:
        y = y + _along(zero_points, self, dim)
    return _saturate(y, dtype)


def _quantize_fake(self, scales, zero_points, dtype, axis: int = 1, div_mode: bool = True):
    _check_quantize_args(self, scales, zero_points, dtype, axis, div_mode)
    return self.new_empty(_result_shape(self.shape, dtype), dtype=_TARGETS[dtype][0])


_family.define(
    "npu_quantize(Tensor self, Tensor scales, Tensor? zero_points, ScalarType dtype, int axis=1, "
    "bool div_mode=True) -> Tensor",
    kernel=_quantize,
    fake=_quantize_fake,
    decompose=True,
)


def npu_quantize(inputs, scales, zero_points, dtype, axis, div_mode=True):
    """``torch.ops.npu.npu_quantize`` under the Python signature Ascend exports."""
    return torch.ops.npu.npu_quantize(inputs, scales, zero_points, dtype, axis, div_mode)


# --- npu_group_quant -----------------------------------------------------------------------

def _check_group_quant_args(x, scale, group_index, offset, dst_dtype) -> torch.dtype:
    op = "npu_group_quant"
    for name, value in (("x", x), ("scale", scale), ("group_index", group_index)):
        check.tensor(op, name, value)
    check.dtype(op, "x", x, check.FLOATING)
    check.dtype(op, "scale", scale, check.FLOATING)
    check.dtype(op, "group_index", group_index, (torch.int32, torch.int64))
    dst_dtype = torch.int8 if dst_dtype is None else dst_dtype
    check.choice(op, "dst_dtype", dst_dtype, (torch.int8, torch.quint4x2))
    check.rank(op, "x", x, (2,))
    check.rank(op, "scale", scale, (2,))
    if scale.shape[1] != x.shape[1] or scale.shape[0] == 0:
        raise ValueError(f"{op}: scale must have shape (groups, {x.shape[1]}) with groups >= 1, got {tuple(scale.shape)}")
    if tuple(group_index.shape) != (scale.shape[0],):
        raise ValueError(f"{op}: group_index must have shape ({scale.shape[0]},), one entry per scale row, got {tuple(group_index.shape)}")
    if offset is not None:
        check.tensor(op, "offset", offset)
        check.same_dtype(op, "offset", offset, "scale", scale)
        if offset.numel() != 1:
            raise ValueError(f"{op}: offset must hold exactly one element, got shape {tuple(offset.shape)}")
    _check_int4_width(op, "x", x, dst_dtype)
    return dst_dtype


def _group_quant(x, scale, group_index, *, offset=None, dst_dtype=None):
    dst_dtype = _check_group_quant_args(x, scale, group_index, offset, dst_dtype)
    rows = torch.arange(x.shape[0], device=x.device, dtype=group_index.dtype)
    groups = torch.searchsorted(group_index, rows, right=True).clamp(max=scale.shape[0] - 1)
    y = x.float() * scale.float()[groups]
    if offset is not None:
        y = y + offset.float().reshape(())
    return _saturate(y, dst_dtype)


def _group_quant_fake(x, scale, group_index, *, offset=None, dst_dtype=None):
    dst_dtype = _check_group_quant_args(x, scale, group_index, offset, dst_dtype)
    return x.new_empty(_result_shape(x.shape, dst_dtype), dtype=_TARGETS[dst_dtype][0])


_family.define(
    "npu_group_quant(Tensor x, Tensor scale, Tensor group_index, *, Tensor? offset=None, "
    "ScalarType? dst_dtype=None) -> Tensor",
    kernel=_group_quant,
    fake=_group_quant_fake,
)


def npu_group_quant(x, scale, group_index, offset=None, dst_dtype=None):
    """``torch.ops.npu.npu_group_quant`` under the Python signature Ascend exports."""
    return torch.ops.npu.npu_group_quant(x, scale, group_index, offset=offset, dst_dtype=dst_dtype)


# --- npu_dynamic_quant_asymmetric ----------------------------------------------------------

def _check_asymmetric_args(x, smooth_scales, group_index, dst_type, quant_mode) -> torch.dtype:
    op = "npu_dynamic_quant_asymmetric"
    check.tensor(op, "input", x)
    check.dtype(op, "input", x, (torch.float16, torch.bfloat16))
    if x.dim() < 2:
        raise ValueError(f"{op}: input must have at least 2 dimensions, got shape {tuple(x.shape)}")
    dst_type = torch.int8 if dst_type is None else dst_type
    check.choice(op, "dst_type", dst_type, (torch.int8, torch.quint4x2))
    check.choice(op, "quant_mode", quant_mode, ("pertoken",))
    _check_int4_width(op, "input", x, dst_type)
    hidden = x.shape[-1]
    if group_index is not None and smooth_scales is None:
        raise ValueError(f"{op}: group_index is given without smooth_scales; pass both or neither")
    if smooth_scales is not None:
        check.tensor(op, "smooth_scales", smooth_scales)
        expected = (hidden,) if group_index is None else (None, hidden)
        if smooth_scales.dim() != len(expected) or smooth_scales.shape[-1] != hidden:
            raise ValueError(
                f"{op}: smooth_scales must have shape ({hidden},) without group_index or "
                f"(experts, {hidden}) with it, got {tuple(smooth_scales.shape)}"
            )
        if group_index is not None:
            check.tensor(op, "group_index", group_index)
            check.dtype(op, "group_index", group_index, (torch.int32,))
            if tuple(group_index.shape) != (smooth_scales.shape[0],):
                raise ValueError(
                    f"{op}: group_index must have shape ({smooth_scales.shape[0]},), one entry per "
                    f"row of smooth_scales, got {tuple(group_index.shape)}"
                )
    return dst_type


def _smoothed(x32, smooth_scales, group_index):
    if smooth_scales is None:
        return x32
    if group_index is None:
        return x32 * smooth_scales.float()
    rows = x32.reshape(-1, x32.shape[-1])
    numbers = torch.arange(rows.shape[0], device=x32.device, dtype=torch.int32)
    groups = torch.searchsorted(group_index, numbers, right=True).clamp(max=smooth_scales.shape[0] - 1)
    return (rows * smooth_scales.float()[groups]).reshape(x32.shape)


def _dynamic_quant_asymmetric(input, *, smooth_scales=None, group_index=None, dst_type=None,
                              quant_mode="pertoken", dst_type_max=0.0):
    dst_type = _check_asymmetric_args(input, smooth_scales, group_index, dst_type, quant_mode)
    _storage, low, high = _TARGETS[dst_type]
    x = _smoothed(input.float(), smooth_scales, group_index)
    row_max, row_min = x.amax(dim=-1), x.amin(dim=-1)
    scale = (row_max - row_min) / (high - low)
    divisor = torch.where(scale == 0, torch.ones_like(scale), scale)
    offset = high - row_max / divisor
    y = _saturate(x / divisor.unsqueeze(-1) + offset.unsqueeze(-1), dst_type)
    return y, scale, offset


def _dynamic_quant_asymmetric_fake(input, *, smooth_scales=None, group_index=None, dst_type=None,
                                   quant_mode="pertoken", dst_type_max=0.0):
    dst_type = _check_asymmetric_args(input, smooth_scales, group_index, dst_type, quant_mode)
    stats = input.new_empty(input.shape[:-1], dtype=torch.float32)
    y = input.new_empty(_result_shape(input.shape, dst_type), dtype=_TARGETS[dst_type][0])
    return y, stats, input.new_empty(input.shape[:-1], dtype=torch.float32)


_family.define(
    "npu_dynamic_quant_asymmetric(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, "
    "ScalarType? dst_type=None, str quant_mode=\"pertoken\", float dst_type_max=0.0) -> (Tensor, Tensor, Tensor)",
    kernel=_dynamic_quant_asymmetric,
    fake=_dynamic_quant_asymmetric_fake,
    decompose=True,
)


def npu_dynamic_quant_asymmetric(input_dummy, smooth_scales=None, group_index=None, dst_type=torch.int8):
    """``torch.ops.npu.npu_dynamic_quant_asymmetric`` under the Python signature Ascend exports."""
    return torch.ops.npu.npu_dynamic_quant_asymmetric(
        input_dummy, smooth_scales=smooth_scales, group_index=group_index, dst_type=dst_type
    )
