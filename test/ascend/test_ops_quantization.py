"""npu_quantize, npu_group_quant, npu_dynamic_quant_asymmetric, npu_anti_quant and
npu_weight_quant_batchmatmul against float64 references of Ascend's formulas, the Python
signatures Ascend exports, argument errors and opcheck."""
from __future__ import annotations

import inspect

import pytest
import torch
from npu_ops_compare import assert_close, opcheck

import torch_npu
from torch_npu.ops import _int4


def assert_quantized(out, ref_float, low, high):
    """``out`` is ``round(ref_float)`` saturated: equal except where float32 and float64 round a
    value within 1e-3 of a .5 boundary differently (then by at most one step)."""
    ref = torch.round(ref_float.double()).clamp(low, high)
    diff = (out.cpu().double() - ref).abs()
    near_tie = ((ref_float.double() - ref_float.double().floor()) - 0.5).abs() < 1e-3
    assert diff.max() <= 1
    assert ((diff == 0) | near_tie).all()


def unpack_reference(words):
    nibbles = [(words.long() >> (4 * i)) & 0xF for i in range(8)]
    values = torch.stack(nibbles, dim=-1)
    values = torch.where(values >= 8, values - 16, values)
    return values.reshape(*words.shape[:-1], words.shape[-1] * 8)


# --- npu_quantize ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,low,high,storage", [
    (torch.qint8, -128, 127, torch.int8), (torch.quint8, 0, 255, torch.uint8), (torch.qint32, -(2**31), 2**31 - 1, torch.int32),
])
def test_npu_quantize_div_mode_per_channel(dtype, low, high, storage):
    x = torch.randn(3, 5, 8) * 50
    scales = torch.rand(5) + 0.2
    zero = torch.randint(-3, 4, (5,)).float()
    out = torch_npu.npu_quantize(x.npu(), scales.npu(), zero.npu(), dtype, 1, True)
    assert out.dtype == storage and out.shape == x.shape
    assert_quantized(out, x.double() / scales.double()[:, None] + zero.double()[:, None], low, high)


@pytest.mark.parametrize("axis", [-1, -2])
def test_npu_quantize_mul_mode_int8_and_int4(axis):
    x = torch.randn(4, 6, 16, dtype=torch.float16)
    dim_size = x.shape[axis]
    scales = (torch.rand(dim_size) * 4 + 1).half()
    shape = [1, 1, 1]
    shape[axis] = -1
    ref = x.double() * scales.double().reshape(shape)
    out = torch_npu.npu_quantize(x.npu(), scales.npu(), None, torch.qint8, axis, False)
    assert out.dtype == torch.int8
    assert_quantized(out, ref, -128, 127)
    packed = torch_npu.npu_quantize(x.npu(), scales.npu(), None, torch.quint4x2, axis, False)
    assert packed.dtype == torch.int32 and packed.shape == (4, 6, 2)
    assert_quantized(unpack_reference(packed.cpu()), ref, -8, 7)


def test_npu_quantize_ascend_documented_example():
    x = torch.randn(1, 1, 12).bfloat16()
    scale = torch.tensor([0.1] * 12).bfloat16()
    out = torch_npu.npu_quantize(x.npu(), scale.npu(), None, torch.qint8, -1, False)
    assert_quantized(out, x.double() * scale.double(), -128, 127)


# --- npu_group_quant ---------------------------------------------------------------------------

@pytest.mark.parametrize("dst_dtype", [None, torch.quint4x2])
def test_npu_group_quant(dst_dtype):
    x = torch.randn(10, 16) * 3
    scale = torch.rand(3, 16) * 4
    group_index = torch.tensor([2, 7, 10])
    offset = torch.tensor([0.5])
    out = torch_npu.npu_group_quant(x.npu(), scale.npu(), group_index.npu(), offset=offset.npu(), dst_dtype=dst_dtype)
    rows = torch.tensor([0] * 2 + [1] * 5 + [2] * 3)
    ref = x.double() * scale.double()[rows] + 0.5
    if dst_dtype is None:
        assert out.dtype == torch.int8
        assert_quantized(out, ref, -128, 127)
    else:
        assert out.dtype == torch.int32 and out.shape == (10, 2)
        assert_quantized(unpack_reference(out.cpu()), ref, -8, 7)


# --- npu_dynamic_quant_asymmetric --------------------------------------------------------------

@pytest.mark.parametrize("dst_type,low,high", [(torch.int8, -128, 127), (torch.quint4x2, -8, 7)])
@pytest.mark.parametrize("smooth", ["none", "vector", "groups"])
def test_npu_dynamic_quant_asymmetric(dst_type, low, high, smooth):
    x = (torch.randn(2, 6, 16) * 2 + 0.5).half()
    kwargs, xs = {}, x.double()
    if smooth == "vector":
        s = (torch.rand(16) + 0.5).half()
        kwargs["smooth_scales"] = s.npu()
        xs = xs * s.double()
    elif smooth == "groups":
        s = (torch.rand(3, 16) + 0.5).half()
        gi = torch.tensor([4, 9, 12], dtype=torch.int32)
        kwargs.update(smooth_scales=s.npu(), group_index=gi.npu())
        rows = torch.tensor([0] * 4 + [1] * 5 + [2] * 3)
        xs = (xs.reshape(12, 16) * s.double()[rows]).reshape(2, 6, 16)
    y, scale, offset = torch_npu.npu_dynamic_quant_asymmetric(x.npu(), dst_type=dst_type, **kwargs)
    ref_scale = (xs.amax(-1) - xs.amin(-1)) / (high - low)
    ref_offset = high - xs.amax(-1) / ref_scale
    assert scale.dtype == offset.dtype == torch.float32 and scale.shape == (2, 6)
    assert_close(scale, ref_scale, torch.float32)
    assert_close(offset, ref_offset, torch.float32, scale=10)
    ref = xs / ref_scale[..., None] + ref_offset[..., None]
    values = unpack_reference(y.cpu()) if dst_type == torch.quint4x2 else y
    assert_quantized(values, ref, low, high)
    # the row's extremes land on the target's extremes
    assert values.cpu().amax(-1).eq(high).all() and values.cpu().amin(-1).eq(low).all()


# --- npu_anti_quant ----------------------------------------------------------------------------

@pytest.mark.parametrize("dst_dtype", [torch.float16, torch.bfloat16])
def test_npu_anti_quant_int8_and_int4(dst_dtype):
    x = torch.randint(-128, 128, (4, 16), dtype=torch.int8)
    scale, offset = torch.rand(16), torch.randn(16)
    out = torch_npu.npu_anti_quant(x.npu(), scale.npu(), offset.npu(), dst_dtype)
    assert out.dtype == dst_dtype
    assert_close(out, (x.double() + offset.double()) * scale.double(), dst_dtype)
    values = torch.randint(-8, 8, (4, 16))
    packed = _int4.pack(values)
    out4 = torch_npu.npu_anti_quant(packed.npu(), scale.npu(), dst_dtype=dst_dtype, src_dtype=torch.quint4x2)
    assert out4.shape == (4, 16)
    assert_close(out4, values.double() * scale.double(), dst_dtype)


def test_npu_anti_quant_default_is_float16():
    x = torch.randint(-5, 5, (3, 8), dtype=torch.int8)
    assert torch_npu.npu_anti_quant(x.npu(), torch.rand(1).npu()).dtype == torch.float16


# --- npu_weight_quant_batchmatmul --------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mode", ["pertensor", "perchannel", "pergroup", "int4", "quant_out"])
def test_npu_weight_quant_batchmatmul(dtype, mode):
    m, k, n = 5, 64, 16
    x = torch.randn(m, k).to(dtype)
    group = 0
    if mode == "int4":
        w_values = torch.randint(-8, 8, (k, n))
        weight = _int4.pack(w_values)
    else:
        w_values = torch.randint(-128, 128, (k, n))
        weight = w_values.to(torch.int8)
    if mode == "pertensor":
        scale, off = torch.rand(1), torch.randn(1)
    elif mode == "pergroup":
        group = 32
        scale, off = torch.rand(2, n), torch.randn(2, n)
    else:
        scale, off = torch.rand(n), torch.randn(n)
    scale, off = (scale / 50).to(dtype), off.to(dtype)
    bias = torch.randn(n).to(dtype)
    kwargs = {}
    if mode == "quant_out":
        kwargs = {"quant_scale": torch.rand(n).npu() * 10, "quant_offset": torch.randn(n).npu()}
    out = torch_npu.npu_weight_quant_batchmatmul(
        x.npu(), weight.npu(), scale.npu(), off.npu(), bias=bias.npu(), antiquant_group_size=group, **kwargs
    )
    s, o = scale.double(), off.double()
    if group:
        s, o = s.repeat_interleave(group, 0), o.repeat_interleave(group, 0)
    ref = x.double() @ ((w_values.double() + o) * s) + bias.double()
    if mode == "quant_out":
        assert out.dtype == torch.int8
        q = ref * kwargs["quant_scale"].cpu().double() + kwargs["quant_offset"].cpu().double()
        diff = (out.cpu().double() - torch.round(q).clamp(-128, 127)).abs()
        assert diff.max() <= 1 and diff.gt(0).float().mean() < 0.05
    else:
        assert out.dtype == dtype and out.shape == (m, n)
        assert_close(out, ref, dtype, scale=4)


def test_python_signatures_are_ascends():
    assert str(inspect.signature(torch_npu.npu_quantize)) == "(inputs, scales, zero_points, dtype, axis, div_mode=True)"
    assert str(inspect.signature(torch_npu.npu_group_quant)) == "(x, scale, group_index, offset=None, dst_dtype=None)"
    assert str(inspect.signature(torch_npu.npu_anti_quant)) == "(x, scale, offset=None, dst_dtype=None, src_dtype=None)"
    assert str(inspect.signature(torch_npu.npu_dynamic_quant_asymmetric)) == (
        "(input_dummy, smooth_scales=None, group_index=None, dst_type=torch.int8)")


def test_argument_errors():
    x = torch.randn(4, 16, device="npu")
    with pytest.raises(ValueError, match="dtype=torch.quint4x2 is not supported"):
        torch_npu.npu_quantize(x, torch.ones(16, device="npu"), None, torch.quint4x2, 1, True)
    with pytest.raises(ValueError, match="scales must have 1 or 16 elements"):
        torch_npu.npu_quantize(x, torch.ones(3, device="npu"), None, torch.qint8, -1, True)
    with pytest.raises(ValueError, match="group_index must have shape"):
        torch_npu.npu_group_quant(x, torch.ones(2, 16, device="npu"), torch.tensor([4], device="npu"))
    with pytest.raises(TypeError, match="input has dtype float32"):
        torch_npu.npu_dynamic_quant_asymmetric(x)
    with pytest.raises(ValueError, match=r"scale must have shape \(1,\) or \(16,\)"):
        torch_npu.npu_anti_quant(torch.ones(4, 16, dtype=torch.int8, device="npu"), torch.ones(3, device="npu"))
    with pytest.raises(ValueError, match="antiquant_group_size=16 must be a multiple of 32"):
        torch_npu.npu_weight_quant_batchmatmul(x.half(), torch.ones(16, 4, dtype=torch.int8, device="npu"),
                                               torch.ones(1, 4, dtype=torch.float16, device="npu"), antiquant_group_size=16)


def test_opcheck():
    x = torch.randn(4, 16, device="npu")
    opcheck(torch.ops.npu.npu_quantize.default, (x, torch.rand(16, device="npu") + 0.1, None, torch.qint8, -1, True))
    opcheck(torch.ops.npu.npu_group_quant.default, (x, torch.rand(2, 16, device="npu"), torch.tensor([1, 4], device="npu")), {"dst_dtype": torch.quint4x2})
    opcheck(torch.ops.npu.npu_dynamic_quant_asymmetric.default, (x.half(),), {"smooth_scales": torch.rand(16, device="npu").half()})
    opcheck(torch.ops.npu.npu_anti_quant.default, (torch.ones(4, 2, dtype=torch.int32, device="npu"), torch.rand(16, device="npu")), {"src_dtype": torch.quint4x2, "dst_dtype": torch.bfloat16})
    opcheck(torch.ops.npu.npu_weight_quant_batchmatmul.default, (x.half(), torch.ones(16, 8, dtype=torch.int8, device="npu"), torch.rand(8, device="npu").half()))
