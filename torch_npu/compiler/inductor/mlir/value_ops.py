"""Inductor's pointwise `ops.*` as arith/math operations on typed SSA values.

Mixin for the kernel emitter (it provides `b`, an SsaBuilder). Each method receives
values (`Val`) and returns a `Val`. Mixed operand dtypes are promoted like torch does.
Float semantics follow torch: max/min propagate NaN, `!=` is true for NaN, float to int
conversion truncates.
"""

import torch

from .dtypes import (
    bit_width,
    compute_dtype,
    compute_type,
    float_literal,
    int_limits,
    is_float,
    is_low_precision,
    is_unsigned,
    memory_type,
)
from .fallback import MlirUnsupported
from .narrow_floats import narrow, widen
from .ssa import Val

# ops whose float implementation is a single math-dialect operation
_MATH_UNARY = {
    "exp": "math.exp",
    "exp2": "math.exp2",
    "expm1": "math.expm1",
    "log": "math.log",
    "log2": "math.log2",
    "log10": "math.log10",
    "log1p": "math.log1p",
    "sqrt": "math.sqrt",
    "rsqrt": "math.rsqrt",
    "sin": "math.sin",
    "cos": "math.cos",
    "tan": "math.tan",
    "tanh": "math.tanh",
    "asin": "math.asin",
    "acos": "math.acos",
    "atan": "math.atan",
    "sinh": "math.sinh",
    "cosh": "math.cosh",
    "asinh": "math.asinh",
    "acosh": "math.acosh",
    "atanh": "math.atanh",
    "erf": "math.erf",
    "erfc": "math.erfc",
    "floor": "math.floor",
    "ceil": "math.ceil",
    "trunc": "math.trunc",
    "round": "math.roundeven",
}

_FCMP = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_ICMP = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_UCMP = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


def _promote(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    return compute_dtype(torch.promote_types(a, b))


class ValueOps:
    # constants and conversions
    def constant(self, value, dtype):
        dtype = compute_dtype(dtype)
        if dtype == torch.bool:
            return Val(self.b.constant("true" if value else "false", "i1"), dtype)
        if is_float(dtype):
            return Val(self.b.constant(float_literal(value, dtype), compute_type(dtype)), dtype)
        value = int(value)
        lo, hi = int_limits(dtype)
        if not lo <= value <= hi:
            raise MlirUnsupported(f"integer constant {value} out of range for {dtype}")
        return Val(self.b.constant(str(value), compute_type(dtype)), dtype)

    def _lift(self, x, like=None):
        if isinstance(x, Val):
            return x
        if isinstance(x, bool):
            return self.constant(x, torch.bool)
        if isinstance(x, int):
            return self.constant(x, like if like is not None and not is_float(like) else torch.int64)
        if isinstance(x, float):
            return self.constant(x, like if like is not None and is_float(like) else torch.float32)
        raise MlirUnsupported(f"operand of type {type(x).__name__}")

    def to_dtype(self, x, dtype, src_dtype=None, use_compute_types=True):
        x = self._lift(x)
        target = compute_dtype(dtype)
        v = self._convert(x, target)
        if is_low_precision(dtype):
            # keep f32 in registers but round to the narrow type, as a store/load would
            mt = memory_type(dtype)
            v = Val(widen(self.b, narrow(self.b, v.name, mt), mt), torch.float32)
        return v

    def _convert(self, x: Val, target: torch.dtype) -> Val:
        src = x.dtype
        if src == target:
            return x
        st, tt = compute_type(src), compute_type(target)
        b = self.b
        if target == torch.bool:
            if is_float(src):
                zero = self.constant(0.0, src).name
                return Val(b.assign(f"arith.cmpf une, {x.name}, {zero} : {st}"), target)
            zero = self.constant(0, src).name
            return Val(b.assign(f"arith.cmpi ne, {x.name}, {zero} : {st}"), target)
        if is_float(src) and is_float(target):
            op = "extf" if bit_width(target) > bit_width(src) else "truncf"
            return Val(b.assign(f"arith.{op} {x.name} : {st} to {tt}"), target)
        if is_float(target):
            op = "uitofp" if is_unsigned(src) else "sitofp"
            return Val(b.assign(f"arith.{op} {x.name} : {st} to {tt}"), target)
        if is_float(src):
            if is_unsigned(target):
                wide = b.assign(f"arith.fptosi {x.name} : {st} to i32")
                return Val(b.assign(f"arith.trunci {wide} : i32 to {tt}"), target)
            return Val(b.assign(f"arith.fptosi {x.name} : {st} to {tt}"), target)
        sw, tw = bit_width(src), bit_width(target)
        if sw == tw:
            return Val(x.name, target)
        if tw > sw:
            op = "extui" if is_unsigned(src) else "extsi"
            return Val(b.assign(f"arith.{op} {x.name} : {st} to {tt}"), target)
        return Val(b.assign(f"arith.trunci {x.name} : {st} to {tt}"), target)

    def to_dtype_bitcast(self, x, dtype, src_dtype):
        x = self._lift(x)
        if bit_width(x.dtype) != bit_width(dtype) or is_low_precision(dtype):
            raise MlirUnsupported("bitcast between different widths")
        t = compute_type(dtype)
        return Val(self.b.assign(f"arith.bitcast {x.name} : {compute_type(x.dtype)} to {t}"), dtype)

    def identity(self, x):
        return self._lift(x)

    # helpers
    def _pair(self, a, b, dtype=None):
        a = self._lift(a, b.dtype if isinstance(b, Val) else None)
        b = self._lift(b, a.dtype)
        dtype = dtype or _promote(a.dtype, b.dtype)
        return self._convert(a, dtype), self._convert(b, dtype), dtype

    def _floating(self, x):
        x = self._lift(x)
        return x if is_float(x.dtype) else self._convert(x, torch.float32)

    def _arith(self, fop, iop, a, b, bool_op=None):
        a, b, dt = self._pair(a, b)
        t = compute_type(dt)
        if is_float(dt):
            op = fop
        elif dt == torch.bool and bool_op:
            op = bool_op
        else:
            op = iop
        if op is None:
            raise MlirUnsupported(f"{fop or iop} on {dt}")
        return Val(self.b.assign(f"{op} {a.name}, {b.name} : {t}"), dt)

    # arithmetic
    def add(self, a, b):
        return self._arith("arith.addf", "arith.addi", a, b, "arith.ori")

    def sub(self, a, b):
        return self._arith("arith.subf", "arith.subi", a, b)

    def mul(self, a, b):
        return self._arith("arith.mulf", "arith.muli", a, b, "arith.andi")

    def truediv(self, a, b):
        return self._arith("arith.divf", None, self._floating(a), self._floating(b))

    def div(self, a, b):
        return self.truediv(a, b)

    def floordiv(self, a, b):
        a, b, dt = self._pair(a, b)
        if is_float(dt):
            return self.floor(self.truediv(a, b))
        op = "arith.divui" if is_unsigned(dt) else "arith.floordivsi"
        return Val(self.b.assign(f"{op} {a.name}, {b.name} : {compute_type(dt)}"), dt)

    def truncdiv(self, a, b):
        a, b, dt = self._pair(a, b)
        if is_float(dt):
            return self.trunc(self.truediv(a, b))
        op = "arith.divui" if is_unsigned(dt) else "arith.divsi"
        return Val(self.b.assign(f"{op} {a.name}, {b.name} : {compute_type(dt)}"), dt)

    def mod(self, a, b):
        # C semantics (sign of the dividend), as Inductor's ops.mod
        a, b, dt = self._pair(a, b)
        if is_float(dt):
            return Val(self.b.assign(f"arith.remf {a.name}, {b.name} : {compute_type(dt)}"), dt)
        op = "arith.remui" if is_unsigned(dt) else "arith.remsi"
        return Val(self.b.assign(f"{op} {a.name}, {b.name} : {compute_type(dt)}"), dt)

    def fmod(self, a, b):
        return self.mod(a, b)

    def remainder(self, a, b):
        # Python semantics (sign of the divisor)
        a, b, dt = self._pair(a, b)
        if is_float(dt):
            q = self.floor(self.truediv(a, b))
            return self.sub(a, self.mul(q, b))
        if is_unsigned(dt):
            return self.mod(a, b)
        r = self.mod(a, b)
        zero = self.constant(0, dt)
        r_neg = self.lt(r, zero)
        b_neg = self.lt(b, zero)
        fix = self.logical_and(self.ne(r, zero), self.ne(r_neg, b_neg))
        return self.where(fix, self.add(r, b), r)

    def neg(self, x):
        x = self._lift(x)
        if is_float(x.dtype):
            return Val(self.b.assign(f"arith.negf {x.name} : {compute_type(x.dtype)}"), x.dtype)
        return self.sub(self.constant(0, x.dtype), x)

    def abs(self, x):
        x = self._lift(x)
        if is_float(x.dtype):
            return Val(self.b.assign(f"math.absf {x.name} : {compute_type(x.dtype)}"), x.dtype)
        if is_unsigned(x.dtype):
            return x
        return Val(self.b.assign(f"math.absi {x.name} : {compute_type(x.dtype)}"), x.dtype)

    def maximum(self, a, b):
        a, b, dt = self._pair(a, b)
        op = "arith.maximumf" if is_float(dt) else ("arith.maxui" if is_unsigned(dt) else "arith.maxsi")
        return Val(self.b.assign(f"{op} {a.name}, {b.name} : {compute_type(dt)}"), dt)

    def minimum(self, a, b):
        a, b, dt = self._pair(a, b)
        op = "arith.minimumf" if is_float(dt) else ("arith.minui" if is_unsigned(dt) else "arith.minsi")
        return Val(self.b.assign(f"{op} {a.name}, {b.name} : {compute_type(dt)}"), dt)

    def relu(self, x):
        x = self._lift(x)
        return self.maximum(x, self.constant(0, x.dtype))

    def square(self, x):
        return self.mul(x, x)

    def reciprocal(self, x):
        x = self._floating(x)
        return self.truediv(self.constant(1.0, x.dtype), x)

    def sigmoid(self, x):
        x = self._floating(x)
        one = self.constant(1.0, x.dtype)
        return self.truediv(one, self.add(one, self.exp(self.neg(x))))

    def pow(self, a, b):
        a, b, dt = self._pair(self._floating(a), self._floating(b))
        return Val(self.b.assign(f"math.powf {a.name}, {b.name} : {compute_type(dt)}"), dt)

    def atan2(self, a, b):
        a, b, dt = self._pair(self._floating(a), self._floating(b))
        return Val(self.b.assign(f"math.atan2 {a.name}, {b.name} : {compute_type(dt)}"), dt)

    def copysign(self, a, b):
        a, b, dt = self._pair(self._floating(a), self._floating(b))
        return Val(self.b.assign(f"math.copysign {a.name}, {b.name} : {compute_type(dt)}"), dt)

    def fma(self, a, b, c):
        a, b, dt = self._pair(a, b)
        c = self._convert(self._lift(c, dt), dt)
        if not is_float(dt):
            return self.add(self.mul(a, b), c)
        return Val(self.b.assign(f"math.fma {a.name}, {b.name}, {c.name} : {compute_type(dt)}"), dt)

    def sign(self, x):
        x = self._lift(x)
        zero = self.constant(0, x.dtype)
        pos = self._convert(self.lt(zero, x), x.dtype)
        neg = self._convert(self.lt(x, zero), x.dtype)
        return self.sub(pos, neg)

    def signbit(self, x):
        x = self._floating(x)
        t = compute_type(x.dtype)
        it = "i64" if t == "f64" else "i32"
        bits = self.b.assign(f"arith.bitcast {x.name} : {t} to {it}")
        zero = self.b.constant("0", it)
        return Val(self.b.assign(f"arith.cmpi slt, {bits}, {zero} : {it}"), torch.bool)

    def isnan(self, x):
        x = self._floating(x)
        return Val(self.b.assign(f"arith.cmpf uno, {x.name}, {x.name} : {compute_type(x.dtype)}"), torch.bool)

    def isinf(self, x):
        x = self._floating(x)
        inf = self.constant(float("inf"), x.dtype)
        return self.eq(self.abs(x), inf)

    # comparisons and logic
    def _compare(self, pred, a, b):
        a, b, dt = self._pair(a, b)
        t = compute_type(dt)
        if is_float(dt):
            return Val(self.b.assign(f"arith.cmpf {_FCMP[pred]}, {a.name}, {b.name} : {t}"), torch.bool)
        table = _UCMP if is_unsigned(dt) else _ICMP
        return Val(self.b.assign(f"arith.cmpi {table[pred]}, {a.name}, {b.name} : {t}"), torch.bool)

    def eq(self, a, b):
        return self._compare("eq", a, b)

    def ne(self, a, b):
        return self._compare("ne", a, b)

    def lt(self, a, b):
        return self._compare("lt", a, b)

    def le(self, a, b):
        return self._compare("le", a, b)

    def gt(self, a, b):
        return self._compare("gt", a, b)

    def ge(self, a, b):
        return self._compare("ge", a, b)

    def _bools(self, a, b):
        return self._convert(self._lift(a), torch.bool), self._convert(self._lift(b), torch.bool)

    def logical_and(self, a, b):
        a, b = self._bools(a, b)
        return Val(self.b.assign(f"arith.andi {a.name}, {b.name} : i1"), torch.bool)

    def logical_or(self, a, b):
        a, b = self._bools(a, b)
        return Val(self.b.assign(f"arith.ori {a.name}, {b.name} : i1"), torch.bool)

    def logical_xor(self, a, b):
        a, b = self._bools(a, b)
        return Val(self.b.assign(f"arith.xori {a.name}, {b.name} : i1"), torch.bool)

    def logical_not(self, a):
        a = self._convert(self._lift(a), torch.bool)
        true = self.b.constant("true", "i1")
        return Val(self.b.assign(f"arith.xori {a.name}, {true} : i1"), torch.bool)

    def bitwise_and(self, a, b):
        return self._arith(None, "arith.andi", a, b, "arith.andi")

    def bitwise_or(self, a, b):
        return self._arith(None, "arith.ori", a, b, "arith.ori")

    def bitwise_xor(self, a, b):
        return self._arith(None, "arith.xori", a, b, "arith.xori")

    def bitwise_not(self, x):
        x = self._lift(x)
        if x.dtype == torch.bool:
            return self.logical_not(x)
        ones = self.constant(-1 if not is_unsigned(x.dtype) else 255, x.dtype)
        return Val(self.b.assign(f"arith.xori {x.name}, {ones.name} : {compute_type(x.dtype)}"), x.dtype)

    def bitwise_left_shift(self, a, b):
        return self._arith(None, "arith.shli", a, b)

    def bitwise_right_shift(self, a, b):
        a, b, dt = self._pair(a, b)
        op = "arith.shrui" if is_unsigned(dt) else "arith.shrsi"
        return Val(self.b.assign(f"{op} {a.name}, {b.name} : {compute_type(dt)}"), dt)

    def where(self, cond, a, b):
        cond = self._convert(self._lift(cond), torch.bool)
        a, b, dt = self._pair(a, b)
        return Val(self.b.assign(f"arith.select {cond.name}, {a.name}, {b.name} : {compute_type(dt)}"), dt)

    def __getattr__(self, name):
        op = _MATH_UNARY.get(name)
        if op is None:
            if name.startswith("_"):
                raise AttributeError(name)

            # Raise on use, not on lookup: attribute probes must keep working.
            def unsupported(*args, **kwargs):
                raise MlirUnsupported(f"op {name}")

            return unsupported

        def unary(x):
            x = self._floating(x)
            return Val(self.b.assign(f"{op} {x.name} : {compute_type(x.dtype)}"), x.dtype)

        return unary

    # Inductor spells some bitwise ops after Python's operator module
    def and_(self, a, b):
        return self.bitwise_and(a, b)

    def or_(self, a, b):
        return self.bitwise_or(a, b)

    def xor(self, a, b):
        return self.bitwise_xor(a, b)

    def invert(self, x):
        return self.bitwise_not(x)

    def lshift(self, a, b):
        return self.bitwise_left_shift(a, b)

    def rshift(self, a, b):
        return self.bitwise_right_shift(a, b)
