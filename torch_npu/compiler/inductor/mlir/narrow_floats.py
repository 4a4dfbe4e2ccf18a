"""f32 <-> bf16 / f16 conversions written as integer arithmetic, never as `arith.extf/truncf`.

LLVM lowers `fptrunc float to bfloat` (and, without F16C, the f16 conversions) to calls of
compiler-runtime helpers such as `__truncsfbf2`, which the JIT resolves from whatever the
process happens to have loaded: on a CPU without native conversion instructions and an
older libgcc the kernel does not link ("JIT session error: Symbols not found"). Written out
here as bit manipulation, the conversions compile to plain integer (and vectorizable) code
on every x86 and ARM CPU and round exactly as torch does on cpu:

* bf16 is the upper half of an f32: widening is a shift, narrowing rounds to nearest even
  on the dropped 16 bits, NaN becomes the quiet NaN 0x7FC0 (c10::BFloat16);
* f16 uses the branch-free IEEE algorithms of c10/util/Half.h (fp16_ieee_to_fp32_value,
  fp16_ieee_from_fp32_value), which get subnormals, overflow to inf and NaN right by
  letting f32 multiplications do the rounding.

Values are SSA names of the `SsaBuilder`; memory keeps its bf16/f16 element type (a
bitcast to i16 is free).
"""

import torch

from .dtypes import float_literal

NARROW_TYPES = ("bf16", "f16")


def _i32(b, value: int) -> str:
    """An i32 constant from its 32-bit pattern."""
    value &= 0xFFFFFFFF
    if value >= 1 << 31:
        value -= 1 << 32
    return b.constant(str(value), "i32")


def _f32(b, value: float) -> str:
    return b.constant(float_literal(value, torch.float32), "f32")


def widen(b, raw: str, mt: str) -> str:
    """f32 value of the bf16/f16 value `raw` (exact)."""
    bits16 = b.assign(f"arith.bitcast {raw} : {mt} to i16")
    w = b.assign(f"arith.extui {bits16} : i16 to i32")
    w = b.assign(f"arith.shli {w}, {_i32(b, 16)} : i32")
    if mt == "bf16":
        return b.assign(f"arith.bitcast {w} : i32 to f32")
    sign = b.assign(f"arith.andi {w}, {_i32(b, 0x80000000)} : i32")
    two_w = b.assign(f"arith.addi {w}, {w} : i32")
    # Normal numbers: move exponent and mantissa into place, rebias with one multiply
    # (which also turns f16 inf/NaN into f32 inf/NaN).
    shifted = b.assign(f"arith.shrui {two_w}, {_i32(b, 4)} : i32")
    shifted = b.assign(f"arith.addi {shifted}, {_i32(b, 0xE0 << 23)} : i32")
    normalized = b.assign(f"arith.bitcast {shifted} : i32 to f32")
    normalized = b.assign(f"arith.mulf {normalized}, {_f32(b, 2.0**-112)} : f32")
    # Subnormals: build 0.5 + m * 2^-24 and subtract 0.5.
    magic = b.assign(f"arith.shrui {two_w}, {_i32(b, 17)} : i32")
    magic = b.assign(f"arith.ori {magic}, {_i32(b, 126 << 23)} : i32")
    denormalized = b.assign(f"arith.bitcast {magic} : i32 to f32")
    denormalized = b.assign(f"arith.subf {denormalized}, {_f32(b, 0.5)} : f32")
    is_subnormal = b.assign(f"arith.cmpi ult, {two_w}, {_i32(b, 1 << 27)} : i32")
    normal_bits = b.assign(f"arith.bitcast {normalized} : f32 to i32")
    subnormal_bits = b.assign(f"arith.bitcast {denormalized} : f32 to i32")
    magnitude = b.assign(f"arith.select {is_subnormal}, {subnormal_bits}, {normal_bits} : i32")
    result = b.assign(f"arith.ori {sign}, {magnitude} : i32")
    return b.assign(f"arith.bitcast {result} : i32 to f32")


def narrow(b, value: str, mt: str) -> str:
    """The bf16/f16 value nearest to the f32 `value` (round to nearest even)."""
    w = b.assign(f"arith.bitcast {value} : f32 to i32")
    if mt == "bf16":
        lsb = b.assign(f"arith.shrui {w}, {_i32(b, 16)} : i32")
        lsb = b.assign(f"arith.andi {lsb}, {_i32(b, 1)} : i32")
        bias = b.assign(f"arith.addi {lsb}, {_i32(b, 0x7FFF)} : i32")
        rounded = b.assign(f"arith.addi {w}, {bias} : i32")
        rounded = b.assign(f"arith.shrui {rounded}, {_i32(b, 16)} : i32")
        is_nan = b.assign(f"arith.cmpf uno, {value}, {value} : f32")
        bits = b.assign(f"arith.select {is_nan}, {_i32(b, 0x7FC0)}, {rounded} : i32")
    else:
        # Scale so that the f32 rounding of `base + bias` below is the f16 rounding.
        magnitude = b.assign(f"math.absf {value} : f32")
        base = b.assign(f"arith.mulf {magnitude}, {_f32(b, 2.0**112)} : f32")
        base = b.assign(f"arith.mulf {base}, {_f32(b, 2.0**-110)} : f32")
        shl1_w = b.assign(f"arith.addi {w}, {w} : i32")
        sign = b.assign(f"arith.andi {w}, {_i32(b, 0x80000000)} : i32")
        exponent = b.assign(f"arith.andi {shl1_w}, {_i32(b, 0xFF000000)} : i32")
        exponent = b.assign(f"arith.maxui {exponent}, {_i32(b, 0x71000000)} : i32")
        bias_bits = b.assign(f"arith.shrui {exponent}, {_i32(b, 1)} : i32")
        bias_bits = b.assign(f"arith.addi {bias_bits}, {_i32(b, 0x07800000)} : i32")
        bias = b.assign(f"arith.bitcast {bias_bits} : i32 to f32")
        base = b.assign(f"arith.addf {bias}, {base} : f32")
        base_bits = b.assign(f"arith.bitcast {base} : f32 to i32")
        exp_bits = b.assign(f"arith.shrui {base_bits}, {_i32(b, 13)} : i32")
        exp_bits = b.assign(f"arith.andi {exp_bits}, {_i32(b, 0x7C00)} : i32")
        mantissa_bits = b.assign(f"arith.andi {base_bits}, {_i32(b, 0x0FFF)} : i32")
        nonsign = b.assign(f"arith.addi {exp_bits}, {mantissa_bits} : i32")
        is_nan = b.assign(f"arith.cmpi ugt, {shl1_w}, {_i32(b, 0xFF000000)} : i32")
        nonsign = b.assign(f"arith.select {is_nan}, {_i32(b, 0x7E00)}, {nonsign} : i32")
        sign16 = b.assign(f"arith.shrui {sign}, {_i32(b, 16)} : i32")
        bits = b.assign(f"arith.ori {sign16}, {nonsign} : i32")
    bits16 = b.assign(f"arith.trunci {bits} : i32 to i16")
    return b.assign(f"arith.bitcast {bits16} : i16 to {mt}")
