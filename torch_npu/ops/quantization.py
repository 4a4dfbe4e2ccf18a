"""Quantisation as Ascend inference code calls it: ``npu_dynamic_quant`` and ``npu_quant_matmul``.

``npu_dynamic_quant(x, *, smooth_scales, group_index, dst_type)`` (Ascend documentation):
symmetric per-token quantisation. With ``smooth_scales`` the rows are first multiplied by
it (one vector, or with ``group_index`` one vector per group of rows, ``group_index``
holding the cumulative row counts). ``scale = rowmax(|x|) / DTYPE_MAX`` (float32, shape
``x.shape[:-1]``) and ``y = round(x / scale)`` (half to even), ``DTYPE_MAX`` being 127 for
int8 and 7 for ``torch.quint4x2``, whose result is packed eight to an int32 (see ``_int4``).
A row of zeros gets scale 0 and zeros.

``npu_quant_matmul(x1, x2, scale, *, offset, pertoken_scale, bias, output_dtype)``
(Ascend documentation): ``acc = x1 @ x2`` over int8 (or packed int4) in int32, plus an
int32 ``bias``; then ``acc * scale`` (per output channel or one value),
``* pertoken_scale`` per row, ``+ bias`` when it is floating, ``+ offset``; int8 results are
rounded half to even and saturated; ``output_dtype=torch.int32`` returns ``acc`` itself.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops import _int4
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_dynamic_quant", "npu_quant_matmul"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

_QUANT_RANGE = {torch.int8: 127, torch.quint4x2: _int4.MAX}


# --- npu_dynamic_quant ---------------------------------------------------------------------

def _check_dynamic_quant_args(x, smooth_scales, group_index, dst_type) -> torch.dtype:
    op = "npu_dynamic_quant"
    check.tensor(op, "input", x)
    check.dtype(op, "input", x, (torch.float16, torch.bfloat16))
    if x.dim() < 2:
        raise ValueError(f"{op}: input must have at least 2 dimensions, got shape {tuple(x.shape)}")
    dst_type = torch.int8 if dst_type is None else dst_type
    check.choice(op, "dst_type", dst_type, tuple(_QUANT_RANGE))
    hidden = x.shape[-1]
    if dst_type == torch.quint4x2:
        check.condition(
            hidden % _int4.VALUES_PER_WORD == 0,
            f"{op}: with dst_type=torch.quint4x2 the last dimension of input ({hidden}) must be "
            "a multiple of 8 (eight int4 values are packed per int32)",
        )
    if group_index is not None and smooth_scales is None:
        raise ValueError(f"{op}: group_index is given without smooth_scales; pass both or neither")
    if smooth_scales is not None:
        check.tensor(op, "smooth_scales", smooth_scales)
        check.same_dtype(op, "smooth_scales", smooth_scales, "input", x)
        if group_index is None:
            if tuple(smooth_scales.shape) != (hidden,):
                raise ValueError(
                    f"{op}: without group_index, smooth_scales must be 1-dimensional with the "
                    f"{hidden} elements of input's last dimension, got shape "
                    f"{tuple(smooth_scales.shape)}"
                )
        else:
            check.tensor(op, "group_index", group_index)
            check.dtype(op, "group_index", group_index, (torch.int32,))
            if smooth_scales.dim() != 2 or smooth_scales.shape[1] != hidden:
                raise ValueError(
                    f"{op}: with group_index, smooth_scales must have shape (groups, {hidden}), "
                    f"got {tuple(smooth_scales.shape)}"
                )
            if tuple(group_index.shape) != (smooth_scales.shape[0],):
                raise ValueError(
                    f"{op}: group_index must be 1-dimensional with one entry per row of "
                    f"smooth_scales ({smooth_scales.shape[0]}), got shape {tuple(group_index.shape)}"
                )
    return dst_type


def _dynamic_quant(input, *, smooth_scales=None, group_index=None, dst_type=None):
    dst_type = _check_dynamic_quant_args(input, smooth_scales, group_index, dst_type)
    x = input.float()
    if smooth_scales is not None:
        if group_index is None:
            x = x * smooth_scales.float()
        else:
            rows = x.reshape(-1, x.shape[-1])
            row_numbers = torch.arange(rows.shape[0], device=x.device, dtype=torch.int32)
            groups = torch.searchsorted(group_index, row_numbers, right=True)
            groups = groups.clamp(max=smooth_scales.shape[0] - 1)
            x = (rows * smooth_scales.float()[groups]).reshape(x.shape)
    qmax = _QUANT_RANGE[dst_type]
    # Multiplying by the reciprocal is what Inductor makes of a division by a constant; written
    # so here, eager and compiled scales are bit-identical (so are the rounded values).
    scale = x.abs().amax(dim=-1) * (1.0 / qmax)
    divisor = torch.where(scale == 0, torch.ones_like(scale), scale)
    y = torch.round(x / divisor.unsqueeze(-1)).clamp(-qmax - 1, qmax)
    if dst_type == torch.quint4x2:
        return _int4.pack(y), scale
    return y.to(torch.int8), scale


def _dynamic_quant_fake(input, *, smooth_scales=None, group_index=None, dst_type=None):
    dst_type = _check_dynamic_quant_args(input, smooth_scales, group_index, dst_type)
    scale = input.new_empty(input.shape[:-1], dtype=torch.float32)
    if dst_type == torch.quint4x2:
        shape = (*input.shape[:-1], input.shape[-1] // _int4.VALUES_PER_WORD)
        return input.new_empty(shape, dtype=torch.int32), scale
    return input.new_empty(input.shape, dtype=torch.int8), scale


_family.define(
    "npu_dynamic_quant(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, "
    "ScalarType? dst_type=None) -> (Tensor, Tensor)",
    kernel=_dynamic_quant,
    fake=_dynamic_quant_fake,
    decompose=True,
)


# --- npu_quant_matmul ----------------------------------------------------------------------

_OUTPUT_DTYPES = (torch.int8, torch.float16, torch.bfloat16, torch.int32)


def _unpacked_shapes(x1, x2) -> tuple[tuple, tuple]:
    if x1.dtype == torch.int32:  # packed int4: the last dimension holds 8 values per word
        return (
            (*x1.shape[:-1], x1.shape[-1] * _int4.VALUES_PER_WORD),
            (*x2.shape[:-1], x2.shape[-1] * _int4.VALUES_PER_WORD),
        )
    return tuple(x1.shape), tuple(x2.shape)


def _check_quant_matmul_args(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, group_sizes):
    op = "npu_quant_matmul"
    for name, value in (("x1", x1), ("x2", x2), ("scale", scale)):
        check.tensor(op, name, value)
    check.dtype(op, "x1", x1, (torch.int8, torch.int32))
    check.same_dtype(op, "x2", x2, "x1", x1)
    for name, value in (("x1", x1), ("x2", x2)):
        if not 2 <= value.dim() <= 6:
            raise ValueError(f"{op}: {name} must have 2 to 6 dimensions, got shape {tuple(value.shape)}")
    if group_sizes is not None:
        raise ValueError(
            f"{op}: group_sizes={list(group_sizes)} (block-wise quantisation) is not supported "
            "by the simulated npu; pass per-channel or per-tensor scales"
        )
    if scale.dtype == torch.int64:
        raise TypeError(
            f"{op}: scale has dtype int64 (the packed form made by npu_trans_quant_param), which "
            "the simulated npu does not read; pass the float32 scale itself"
        )
    check.dtype(op, "scale", scale, (torch.float32, torch.bfloat16))
    out_dtype = torch.int8 if output_dtype is None else output_dtype
    check.choice(op, "output_dtype", out_dtype, _OUTPUT_DTYPES)
    shape1, shape2 = _unpacked_shapes(x1, x2)
    m, k, n = shape1[-2], shape1[-1], shape2[-1]
    check.condition(
        shape2[-2] == k,
        f"{op}: x1 of shape {tuple(x1.shape)} and x2 of shape {tuple(x2.shape)} cannot be "
        f"multiplied (k={k} vs {shape2[-2]})",
    )
    if scale.dim() != 1 or scale.shape[0] not in (1, n):
        raise ValueError(
            f"{op}: scale must be 1-dimensional with 1 or n={n} elements, got shape "
            f"{tuple(scale.shape)}"
        )
    if offset is not None:
        check.tensor(op, "offset", offset)
        check.dtype(op, "offset", offset, (torch.float32,))
        if out_dtype != torch.int8:
            raise ValueError(f"{op}: offset is only used with an int8 output (output_dtype={out_dtype})")
        if offset.dim() != 1 or offset.shape[0] not in (1, n):
            raise ValueError(
                f"{op}: offset must be 1-dimensional with 1 or n={n} elements, got shape "
                f"{tuple(offset.shape)}"
            )
    if pertoken_scale is not None:
        check.tensor(op, "pertoken_scale", pertoken_scale)
        check.dtype(op, "pertoken_scale", pertoken_scale, (torch.float32,))
        if tuple(pertoken_scale.shape) != (m,):
            raise ValueError(
                f"{op}: pertoken_scale must have shape (m,) = ({m},), got {tuple(pertoken_scale.shape)}"
            )
        if out_dtype not in (torch.float16, torch.bfloat16):
            raise ValueError(
                f"{op}: pertoken_scale needs output_dtype torch.float16 or torch.bfloat16, got {out_dtype}"
            )
    if bias is not None:
        check.tensor(op, "bias", bias)
        check.dtype(op, "bias", bias, (torch.int32, torch.float16, torch.bfloat16, torch.float32))
        if bias.shape[-1] != n or bias.dim() not in (1, 3) or (bias.dim() == 3 and bias.shape[1] != 1):
            raise ValueError(
                f"{op}: bias must have shape (n,) or (batch, 1, n) with n={n}, got {tuple(bias.shape)}"
            )
    batch = torch.broadcast_shapes(shape1[:-2], shape2[:-2])
    return out_dtype, (*batch, m, n)


def _quant_matmul(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                  output_dtype=None, group_sizes=None):
    out_dtype, _ = _check_quant_matmul_args(
        x1, x2, scale, offset, pertoken_scale, bias, output_dtype, group_sizes
    )
    if x1.dtype == torch.int32:
        a, b = _int4.unpack(x1), _int4.unpack(x2)
    else:
        a, b = x1.to(torch.int32), x2.to(torch.int32)
    acc = torch.matmul(a, b)
    if bias is not None and bias.dtype == torch.int32:
        acc = acc + bias
    if out_dtype == torch.int32:
        return acc.contiguous()
    out = acc.double() * scale.double()
    if pertoken_scale is not None:
        out = out * pertoken_scale.double().unsqueeze(-1)
    if bias is not None and bias.dtype != torch.int32:
        out = out + bias.double()
    if out_dtype == torch.int8:
        if offset is not None:
            out = out + offset.double()
        return torch.round(out).clamp(-128, 127).to(torch.int8).contiguous()
    return out.to(out_dtype).contiguous()


def _quant_matmul_fake(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                       output_dtype=None, group_sizes=None):
    out_dtype, shape = _check_quant_matmul_args(
        x1, x2, scale, offset, pertoken_scale, bias, output_dtype, group_sizes
    )
    return x1.new_empty(shape, dtype=out_dtype)


_family.define(
    "npu_quant_matmul(Tensor x1, Tensor x2, Tensor scale, *, Tensor? offset=None, "
    "Tensor? pertoken_scale=None, Tensor? bias=None, ScalarType? output_dtype=None, "
    "int[]? group_sizes=None) -> Tensor",
    kernel=_quant_matmul,
    fake=_quant_matmul_fake,
)



def npu_dynamic_quant(input_dummy, smooth_scales=None, group_index=None, dst_type=torch.int8):
    """``torch.ops.npu.npu_dynamic_quant`` under the Python signature Ascend exports
    (positional options)."""
    return torch.ops.npu.npu_dynamic_quant(
        input_dummy, smooth_scales=smooth_scales, group_index=group_index, dst_type=dst_type
    )


npu_quant_matmul = torch.ops.npu.npu_quant_matmul
