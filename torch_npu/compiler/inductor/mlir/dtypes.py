"""torch dtypes as MLIR types: the in-memory element type and the type values compute in.

Half-precision floats are loaded into f32 and rounded back on store (as Inductor's C++
backend does); bool is an i1 in registers and one byte in memory; uint8 shares i8 with
int8 and is told apart by `is_unsigned` where signedness matters.
"""

import struct

import torch

from .fallback import MlirUnsupported

_MEMORY = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "i8",
    torch.bool: "i8",
}
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def memory_type(dtype: torch.dtype) -> str:
    try:
        return _MEMORY[dtype]
    except KeyError:
        raise MlirUnsupported(f"dtype {dtype}") from None


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a value of `dtype` is held in between loads and stores."""
    memory_type(dtype)
    return torch.float32 if dtype in _LOW_PRECISION else dtype


def compute_type(dtype: torch.dtype) -> str:
    dtype = compute_dtype(dtype)
    return "i1" if dtype == torch.bool else _MEMORY[dtype]


def is_low_precision(dtype: torch.dtype) -> bool:
    return dtype in _LOW_PRECISION


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def is_unsigned(dtype: torch.dtype) -> bool:
    return dtype in (torch.uint8, torch.bool)


def bit_width(dtype: torch.dtype) -> int:
    return 1 if dtype == torch.bool else dtype.itemsize * 8


def float_literal(value: float, dtype: torch.dtype) -> str:
    """Exact MLIR literal (hex bit pattern) so inf/nan and rounding survive the text."""
    if compute_dtype(dtype) == torch.float64:
        return "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    return "0x%08X" % struct.unpack("<I", struct.pack("<f", float(value)))[0]


def int_limits(dtype: torch.dtype):
    if dtype == torch.bool:
        return 0, 1
    info = torch.iinfo(dtype)
    return info.min, info.max
