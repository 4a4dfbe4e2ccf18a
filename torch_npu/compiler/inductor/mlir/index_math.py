"""Inductor's sympy index expressions as MLIR `index` arithmetic.

Loop variables and indirect indices map to SSA values; any other symbol is a size
variable, which becomes an i64 kernel argument (dynamic shapes). Division semantics
follow Inductor's C++ backend: FloorDiv floors, ModularIndexing assumes non-negative
operands (as the C++ `%` does).
"""

import sympy

from torch.utils._sympy.functions import (
    CleanDiv,
    FloorDiv,
    Identity,
    Max,
    Min,
    ModularIndexing,
    Mod,
    PythonMod,
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
        if isinstance(expr, (PythonMod, Mod)):
            a, m = self.index(expr.args[0]), self.index(expr.args[1])
            q = self._binop("floordivsi", a, m)
            return self._binop("subi", a, self._binop("muli", q, m))
        if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
            base = self.index(expr.base)
            acc = base
            for _ in range(int(expr.exp) - 1):
                acc = self._binop("muli", acc, base)
            return acc
        if isinstance(expr, (sympy.Min, sympy.Max, Min, Max)):
            op = "minsi" if isinstance(expr, (sympy.Min, Min)) else "maxsi"
            vals = [self.index(a) for a in expr.args]
            acc = vals[0]
            for v in vals[1:]:
                acc = self._binop(op, acc, v)
            return acc
        if isinstance(expr, Identity):
            return self.index(expr.args[0])
        raise MlirUnsupported(f"index expression {type(expr).__name__}")

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
