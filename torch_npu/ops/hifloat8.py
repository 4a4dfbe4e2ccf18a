"""``torch_npu.HiFloat8Tensor``: tensors stored in Huawei's HiFloat8 (HiF8) 8-bit format, as
Ascend's fp8 training code builds them (``HiFloat8Tensor.to_hifloat8(x)``).

The HiF8 code of a value (the HiF8 paper, "Ascend HiFloat8 Format for Deep Learning"):
a sign bit, then a prefix ("dot") field saying how many exponent bits follow, then the
exponent, then the mantissa, 8 bits in all::

    dot   exponent bits D   mantissa bits   exponents
    11    4                 1               +-8 .. +-15
    10    3                 2               +-4 .. +-7
    01    2                 3               +-2, +-3
    001   1                 3               +-1
    0001  0                 3               0
    0000  denormal          3 (M)           2**(M - 23), M = 1..7 (M = 0: zero)

The exponent is sign and magnitude with an implicit leading 1 (its first bit is the sign,
0 positive). Normal values are ``2**E * (1 + m / 2**bits)``. The largest code (E = 15,
mantissa 1) is infinity, ``0x80`` is NaN; the largest finite value is ``2**15``. Encoding rounds
to the nearest code, ties away from zero (the rounding the paper specifies), and values past
halfway to the next step above ``2**15`` become infinity.

The tensor is a wrapper subclass: its storage is the uint8 ``data`` and its dtype the nominal
``dtype`` its values are read back in. Reshapes, views, transposes, clones keep the HiF8 data;
any other operation sees the decoded values.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch.utils._pytree import tree_map

__all__ = ["HiFloat8Tensor"]

NAN_CODE = 0x80
INF_CODE = 0x6F


def _decode_code(code: int) -> float:
    """The value of one HiF8 code (0..255)."""
    if code == NAN_CODE:
        return float("nan")
    sign = -1.0 if code & 0x80 else 1.0
    low = code & 0x7F
    if low == INF_CODE:
        return sign * float("inf")
    bits = format(low, "07b")
    for dot, exponent_bits in (("11", 4), ("10", 3), ("01", 2), ("001", 1), ("0001", 0)):
        if bits.startswith(dot):
            rest = bits[len(dot):]
            exponent_field, mantissa_field = rest[:exponent_bits], rest[exponent_bits:]
            if exponent_bits:
                magnitude = int("1" + exponent_field[1:], 2)
                exponent = -magnitude if exponent_field[0] == "1" else magnitude
            else:
                exponent = 0
            mantissa = int(mantissa_field, 2) / (1 << len(mantissa_field))
            return sign * 2.0**exponent * (1 + mantissa)
    m = int(bits[4:], 2)  # denormal
    return sign * (2.0 ** (m - 23) if m else 0.0)


_DECODE_TABLE = torch.tensor([_decode_code(c) for c in range(256)], dtype=torch.float64)
# Non-negative finite codes in value order, and the midpoints between neighbours.
_POSITIVE_CODES = sorted((c for c in range(128) if c != INF_CODE), key=lambda c: _DECODE_TABLE[c].item())
_POSITIVE_VALUES = _DECODE_TABLE[_POSITIVE_CODES]
_MIDPOINTS = (_POSITIVE_VALUES[1:] + _POSITIVE_VALUES[:-1]) / 2
MAX_FINITE = float(_POSITIVE_VALUES[-1])
_OVERFLOW = MAX_FINITE * 1.25  # halfway to the next step (2**15 * 1.5)


def encode(values: torch.Tensor) -> torch.Tensor:
    """HiF8 codes (uint8) of ``values``: nearest, ties away from zero."""
    x = values.detach().double()
    magnitude = x.abs()
    # right=True puts an exact midpoint in the upper bucket: ties away from zero.
    index = torch.bucketize(magnitude, _MIDPOINTS.to(x.device), right=True)
    codes = torch.tensor(_POSITIVE_CODES, dtype=torch.int64, device=x.device)[index.clamp(max=len(_POSITIVE_CODES) - 1)]
    codes = torch.where(magnitude >= _OVERFLOW, torch.full_like(codes, INF_CODE), codes)
    codes = torch.where((x < 0) & (codes != 0), codes | 0x80, codes)
    codes = torch.where(torch.isnan(x), torch.full_like(codes, NAN_CODE), codes)
    return codes.to(torch.uint8)


def decode(codes: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Values of HiF8 ``codes`` (uint8) in ``dtype``."""
    return _DECODE_TABLE.to(codes.device)[codes.long()].to(dtype)


class HiFloat8Tensor(torch.Tensor):
    """A tensor whose values are stored as HiF8 codes (``data``, uint8) and read as ``dtype``."""

    @staticmethod
    def __new__(cls, *, data: torch.Tensor, dtype: torch.dtype = torch.float32):
        if not isinstance(data, torch.Tensor) or data.dtype != torch.uint8:
            raise TypeError(
                f"HiFloat8Tensor: data must be a uint8 tensor of HiF8 codes, got "
                f"{getattr(data, 'dtype', type(data).__name__)}; use HiFloat8Tensor.to_hifloat8(x) to encode values"
            )
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise TypeError(f"HiFloat8Tensor: dtype must be a floating dtype to read the values in, got {dtype}")
        self = torch.Tensor._make_wrapper_subclass(
            cls, data.shape, strides=data.stride(), storage_offset=data.storage_offset(), dtype=dtype,
            device=data.device, requires_grad=False,
        )
        self._data = data
        return self

    def __init__(self, *, data: torch.Tensor, dtype: torch.dtype = torch.float32):
        super().__init__()

    def __repr__(self, *, tensor_contents=None) -> str:
        return f"HiFloat8Tensor(data={self.from_hifloat8()}, dtype={self.dtype})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(t):
            return t.from_hifloat8() if isinstance(t, HiFloat8Tensor) else t

        return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))

    # --- conversions -------------------------------------------------------------------

    @staticmethod
    def to_hifloat8(tensor: torch.Tensor):
        """``tensor``'s values encoded as HiF8, read back in ``tensor``'s dtype."""
        if isinstance(tensor, HiFloat8Tensor):
            return tensor
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
            raise TypeError(f"HiFloat8Tensor.to_hifloat8: expected a floating-point tensor, got {getattr(tensor, 'dtype', type(tensor).__name__)}")
        return HiFloat8Tensor(data=encode(tensor), dtype=tensor.dtype)

    def from_hifloat8(self, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
        """The decoded values, in ``dtype`` (default: this tensor's dtype)."""
        return decode(self._data, dtype or self.dtype)

    def float(self) -> torch.Tensor:
        return self.from_hifloat8(torch.float32)

    def half(self) -> torch.Tensor:
        return self.from_hifloat8(torch.float16)

    def bfloat16(self) -> torch.Tensor:
        return self.from_hifloat8(torch.bfloat16)

    def cpu(self) -> torch.Tensor:
        return self.from_hifloat8().cpu()

    def to_dtype(self, dtype: torch.dtype) -> "HiFloat8Tensor":
        """The same HiF8 data read as ``dtype``."""
        return HiFloat8Tensor(data=self._data, dtype=dtype)

    @staticmethod
    def make_like(tensor: "HiFloat8Tensor", *, data: torch.Tensor, **kwargs) -> "HiFloat8Tensor":
        """A HiFloat8Tensor over ``data`` with ``tensor``'s dtype (``dtype=`` overrides it)."""
        return HiFloat8Tensor(data=data, dtype=kwargs.get("dtype", tensor.dtype))

    # --- layout changes that keep the codes --------------------------------------------

    def clone(self) -> "HiFloat8Tensor":
        return HiFloat8Tensor.make_like(self, data=self._data.clone())

    def contiguous(self, *, memory_format: torch.memory_format = torch.contiguous_format) -> "HiFloat8Tensor":
        return HiFloat8Tensor.make_like(self, data=self._data.contiguous(memory_format=memory_format))

    def view(self, *shape: Tuple[int]) -> "HiFloat8Tensor":
        return HiFloat8Tensor.make_like(self, data=self._data.view(*shape))

    def reshape(self, *shape: Tuple[int]) -> "HiFloat8Tensor":
        return HiFloat8Tensor.make_like(self, data=self._data.reshape(*shape))

    def transpose(self, dim0, dim1):
        return HiFloat8Tensor.make_like(self, data=self._data.transpose(dim0, dim1))
