"""Inductor's sympy index expressions as MLIR `index` arithmetic.

Loop variables and indirect indices map to SSA values; any other symbol is a size
variable, which becomes an i64 kernel argument (dynamic shapes). Division semantics
follow Inductor's C++ backend: FloorDiv floors, ModularIndexing assumes non-negative
operands (as the C++ `%` does).

Every integer-valued function of `torch.utils._sympy.functions` that Inductor's printers
emit in index expressions is covered: FloorDiv, CleanDiv (and CeilDiv, which builds one of
the two), ModularIndexing, PythonMod/Mod, Min/Max, Abs, Where and Piecewise with their
relational and boolean conditions, PowByNatural and Pow (LShift/RShift build them), the
bitwise functions, Identity, and the float-to-int roundings (FloorToInt, CeilToInt,
TruncToInt, RoundToInt, floor, ceiling) of real-valued size expressions (IntTrueDiv,
FloatTrueDiv, ToFloat, FloatPow), which are computed in f64 as the C++ printer does.
"""

import sympy

from torch.utils._sympy.functions import (
    BitwiseFn_bitwise_and,
    BitwiseFn_bitwise_or,
    BitwiseFn_bitwise_xor,
    CeilToInt,
    CleanDiv,
    FloorDiv,
    FloorToInt,
    Identity,
    Max,
    Min,
    ModularIndexing,
    Mod,
    PowByNatural,
    PythonMod,
    RoundToInt,
    TruncToInt,
    Where,
)

from .fallback import MlirUnsupported


class IndexMath:
    """Mixin for the kernel emitter: needs `b` (SsaBuilder), `args` (KernelArgs), `symbols`."""

    def index(self, expr) -> str:
        expr = sympy.sympify(expr)
        key = ("index", expr)
        hit = self.b.lookup(key)
        if hit is not None:
            return hit
        name = self._index(expr)
        self.b.remember(key, name)
        return name

    def _binop(self, op: str, lhs: str, rhs: str) -> str:
        return self.b.assign(f"arith.{op} {lhs}, {rhs} : index", "i")

    def _index(self, expr) -> str:
        b = self.b
        if expr.is_Integer:
            return b.index_constant(int(expr))
        if expr.is_Symbol:
            if expr in self.symbols:
                return self.symbols[expr]
            return self.size_argument(expr)
        if isinstance(expr, sympy.Add):
            terms = [self.index(a) for a in expr.args]
            acc = terms[0]
            for t in terms[1:]:
                acc = self._binop("addi", acc, t)
            return acc
        if isinstance(expr, sympy.Mul):
            factors = []
            for a in expr.args:
                if a.is_Rational and not a.is_Integer:
                    raise MlirUnsupported(f"rational index factor in {expr}")
                factors.append(self.index(a))
            acc = factors[0]
            for f in factors[1:]:
                acc = self._binop("muli", acc, f)
            return acc
        if isinstance(expr, FloorDiv):
            return self._binop("floordivsi", self.index(expr.args[0]), self.index(expr.args[1]))
        if isinstance(expr, CleanDiv):
            return self._binop("divsi", self.index(expr.args[0]), self.index(expr.args[1]))
        if isinstance(expr, ModularIndexing):
            x, div, mod = expr.args
            q = self.index(x) if div == 1 else self._binop("divsi", self.index(x), self.index(div))
            return self._binop("remsi", q, self.index(mod))
        if isinstance(expr, (PythonMod, Mod, sympy.Mod)):
            a, m = self.index(expr.args[0]), self.index(expr.args[1])
            q = self._binop("floordivsi", a, m)
            return self._binop("subi", a, self._binop("muli", q, m))
        if isinstance(expr, (sympy.Pow, PowByNatural)):
            base, exp = expr.args
            if exp.is_Integer and int(exp) >= 0:
                acc = self.index(sympy.Integer(1)) if int(exp) == 0 else self.index(base)
                for _ in range(int(exp) - 1):
                    acc = self._binop("muli", acc, self.index(base))
                return acc
            if isinstance(expr, PowByNatural):
                return self._power_loop(self.index(base), self.index(exp))
            raise MlirUnsupported(f"index power with exponent {exp}")
        if isinstance(expr, (sympy.Min, sympy.Max, Min, Max)):
            op = "minsi" if isinstance(expr, (sympy.Min, Min)) else "maxsi"
            vals = [self.index(a) for a in expr.args]
            acc = vals[0]
            for v in vals[1:]:
                acc = self._binop(op, acc, v)
            return acc
        if isinstance(expr, Identity):
            return self.index(expr.args[0])
        if isinstance(expr, sympy.Abs):
            x = self.index(expr.args[0])
            return self._binop("maxsi", x, self._binop("subi", self.index(sympy.Integer(0)), x))
        if isinstance(expr, Where):
            cond, then, other = expr.args
            return self._select(self.condition(cond), self.index(then), self.index(other))
        if isinstance(expr, sympy.Piecewise):
            # Conditions are tried in order; the last one is `True` (sympy requires a default).
            *cases, (last, _) = expr.args
            acc = self.index(last)
            for value, cond in reversed(cases):
                acc = self._select(self.condition(cond), self.index(value), acc)
            return acc
        bitwise = {BitwiseFn_bitwise_and: "andi", BitwiseFn_bitwise_or: "ori", BitwiseFn_bitwise_xor: "xori"}
        if type(expr) in bitwise:
            return self._binop(bitwise[type(expr)], self.index(expr.args[0]), self.index(expr.args[1]))
        rounding = {FloorToInt: "floor", sympy.floor: "floor", CeilToInt: "ceil", sympy.ceiling: "ceil",
                    RoundToInt: "roundeven", TruncToInt: None}
        for kind, fn in rounding.items():
            if isinstance(expr, kind):
                return self._float_to_index(expr.args[0], fn)
        raise MlirUnsupported(f"index expression {type(expr).__name__}")

    def _select(self, cond: str, then: str, other: str) -> str:
        return self.b.assign(f"arith.select {cond}, {then}, {other} : index", "i")

    _COMPARISONS = {sympy.StrictLessThan: "slt", sympy.LessThan: "sle", sympy.StrictGreaterThan: "sgt",
                    sympy.GreaterThan: "sge", sympy.Equality: "eq", sympy.Unequality: "ne"}

    def condition(self, expr) -> str:
        """A boolean index expression (relational, And/Or/Not, true/false) as an i1 value."""
        b = self.b
        if expr is sympy.true or expr is sympy.false:
            return b.constant("true" if expr is sympy.true else "false", "i1")
        for kind, pred in self._COMPARISONS.items():
            if isinstance(expr, kind):
                lhs, rhs = self.index(expr.lhs), self.index(expr.rhs)
                return b.assign(f"arith.cmpi {pred}, {lhs}, {rhs} : index")
        if isinstance(expr, (sympy.And, sympy.Or)):
            op = "andi" if isinstance(expr, sympy.And) else "ori"
            vals = [self.condition(a) for a in expr.args]
            acc = vals[0]
            for v in vals[1:]:
                acc = b.assign(f"arith.{op} {acc}, {v} : i1")
            return acc
        if isinstance(expr, sympy.Not):
            return b.assign(f"arith.xori {self.condition(expr.args[0])}, {b.constant('true', 'i1')} : i1")
        raise MlirUnsupported(f"index condition {type(expr).__name__}")

    def _float_to_index(self, expr, fn) -> str:
        """floor/ceil/round-half-even/trunc of a real-valued size expression, as an index."""
        x = self._float_expr(expr).name
        if fn is not None:
            x = self.b.assign(f"math.{fn} {x} : f64")
        i = self.b.assign(f"arith.fptosi {x} : f64 to i64")
        return self.b.assign(f"arith.index_cast {i} : i64 to index", "i")

    def _power_loop(self, base: str, exp: str) -> str:
        """base ** exp for a run-time natural exponent (PowByNatural of a size)."""
        b = self.b
        one, zero = self.index(sympy.Integer(1)), self.index(sympy.Integer(0))
        step = self.index(sympy.Integer(1))
        acc, it, partial, product = b.fresh("pow"), b.fresh("k"), b.fresh("p"), b.fresh("p")
        b.emit(f"{acc} = scf.for {it} = {zero} to {exp} step {step} iter_args({partial} = {one}) -> (index) {{")
        b.emit(f"  {product} = arith.muli {partial}, {base} : index")
        b.emit(f"  scf.yield {product} : index")
        b.emit("}")
        return acc

    def size_argument(self, sym) -> str:
        """Size symbol -> index value of the i64 kernel argument carrying it."""
        key = ("size", sym)
        hit = self.b.scopes[0].get(key)
        if hit is not None:
            return hit
        arg = self.args.size(sym)
        name = self.b.fresh("sz")
        self.b.prologue.append(f"  {name} = arith.index_cast %{arg} : i64 to index")
        self.b.scopes[0][key] = name
        return name
