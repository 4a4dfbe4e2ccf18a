"""torch_npu.HiFloat8Tensor: the HiF8 code table against the paper's bit layout (decoded here
by arithmetic on the bits), exact round trips, round-to-nearest with ties away from zero, the
special codes, and the tensor API Ascend's fp8 code uses."""
from __future__ import annotations

import inspect
import math

import pytest
import torch

import torch_npu
from torch_npu.ops import hifloat8

HiFloat8Tensor = torch_npu.HiFloat8Tensor


def paper_value(code):
    """HiF8 by the bit layout: S | dot | exponent (sign-magnitude, implicit 1) | mantissa."""
    if code == 0x80:
        return math.nan
    sign = -1 if code >> 7 else 1
    low = code & 0x7F
    if low == 0x6F:
        return sign * math.inf
    if low >> 5 == 0b11:
        d, rest, width = 4, low & 0x1F, 5
    elif low >> 5 == 0b10:
        d, rest, width = 3, low & 0x1F, 5
    elif low >> 5 == 0b01:
        d, rest, width = 2, low & 0x1F, 5
    elif low >> 4 == 0b001:
        d, rest, width = 1, low & 0x0F, 4
    elif low >> 3 == 0b0001:
        d, rest, width = 0, low & 0x07, 3
    else:
        m = low & 0x07
        return sign * (2.0 ** (m - 23) if m else 0.0)
    mbits = width - d
    mantissa = rest & ((1 << mbits) - 1)
    exponent_field = rest >> mbits
    if d == 0:
        exponent = 0
    else:
        magnitude = (1 << (d - 1)) | (exponent_field & ((1 << (d - 1)) - 1))
        exponent = -magnitude if exponent_field >> (d - 1) else magnitude
    return sign * 2.0**exponent * (1 + mantissa / 2**mbits)


def test_every_code_decodes_as_the_paper_lays_it_out():
    codes = torch.arange(256, dtype=torch.uint8)
    decoded = hifloat8.decode(codes.npu(), torch.float64).cpu().tolist()
    for code, value in enumerate(decoded):
        expected = paper_value(code)
        if math.isnan(expected):
            assert math.isnan(value), code
        else:
            assert value == expected, (hex(code), value, expected)
    finite = [v for v in decoded if math.isfinite(v)]
    assert max(finite) == 2.0**15 and min(v for v in finite if v > 0) == 2.0**-22
    assert len(set(abs(v) for v in finite)) == 127  # every finite magnitude is coded once


def test_round_trip_of_every_representable_value_is_exact():
    values = hifloat8._DECODE_TABLE[torch.isfinite(hifloat8._DECODE_TABLE)]
    h = HiFloat8Tensor.to_hifloat8(values.npu())
    assert torch.equal(h.from_hifloat8(torch.float64).cpu(), values)


def test_encoding_rounds_to_nearest_ties_away_from_zero():
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(2000, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(-6, 5, (2000,), generator=g)])
    table = hifloat8._DECODE_TABLE[torch.isfinite(hifloat8._DECODE_TABLE)]
    got = HiFloat8Tensor.to_hifloat8(x.npu()).from_hifloat8(torch.float64).cpu()
    distance = (x[:, None] - table[None]).abs()
    best = distance.min(1).values
    assert torch.equal((got - x).abs(), best)  # a nearest code
    # exact midpoints go away from zero
    positive = torch.sort(table[table > 0]).values
    mids = (positive[1:] + positive[:-1]) / 2
    up = HiFloat8Tensor.to_hifloat8(mids).from_hifloat8(torch.float64)
    assert torch.equal(up, positive[1:])
    assert torch.equal(HiFloat8Tensor.to_hifloat8(-mids).from_hifloat8(torch.float64), -positive[1:])


def test_special_values():
    x = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 2.0**15, 2.0**15 * 1.3, 1e-30])
    h = HiFloat8Tensor.to_hifloat8(x)
    assert h._data.tolist() == [0x00, 0x00, 0x6F, 0xEF, 0x80, 0x6E, 0x6F, 0x00]


def test_tensor_api():
    x = torch.randn(3, 4, device="npu", dtype=torch.bfloat16)
    h = HiFloat8Tensor.to_hifloat8(x)
    assert isinstance(h, torch.Tensor) and h.dtype == torch.bfloat16 and h.shape == (3, 4) and h._data.dtype == torch.uint8
    decoded = h.from_hifloat8()
    assert decoded.dtype == torch.bfloat16 and decoded.device.type == "npu"
    assert h.float().dtype == torch.float32 and h.half().dtype == torch.float16 and h.bfloat16().dtype == torch.bfloat16
    assert h.cpu().device.type == "cpu"
    for changed, expected in ((h.transpose(0, 1), decoded.t()), (h.reshape(12), decoded.reshape(12)),
                              (h.view(2, 6), decoded.view(2, 6)), (h.clone(), decoded),
                              (h.transpose(0, 1).contiguous(), decoded.t())):
        assert isinstance(changed, HiFloat8Tensor)
        assert torch.equal(changed.from_hifloat8(), expected)
    assert h.to_dtype(torch.float32).dtype == torch.float32
    assert HiFloat8Tensor.make_like(h, data=h._data.clone()).dtype == torch.bfloat16
    # any other operation sees the decoded values
    assert torch.equal((h * 2).float(), decoded.float() * 2)
    assert str(inspect.signature(HiFloat8Tensor)) == "(*, data: 'torch.Tensor', dtype: 'torch.dtype' = torch.float32)"
    with pytest.raises(TypeError, match="data must be a uint8 tensor"):
        HiFloat8Tensor(data=torch.randn(3))
