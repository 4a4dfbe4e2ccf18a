"""The ``mlir`` backend translates every function Inductor's index expressions use.

One kernel per function (``torch.utils._sympy.functions`` and the sympy builtins Inductor's
printers handle): the emitter writes the expression's value at every point of a 2-D loop
into an int64 buffer, the kernel is JIT-compiled and run, and each value must equal
sympy's own evaluation of the expression at that point (Python semantics: floor division,
Python modulus, round half to even). These kernels go through the emitter and the JIT of
the backend without an Inductor compile each, which keeps the test fast on a small
machine; ``test_t5_relative_position_buckets_compile_without_fallback`` then compiles one
real graph (T5's relative position buckets: ``Abs``, plus floor division, modulus, clamps)
with ``npu_backend="mlir"`` and checks it against eager with no fallback to C++.
"""
from __future__ import annotations

import math

import pytest
import sympy
import torch

import torch_npu  # noqa: E402  (a missing package is a failure, not a skip)
pytest.importorskip("torch_mlir")

from torch._inductor.utils import sympy_index_symbol  # noqa: E402
from torch.utils._sympy import functions as F  # noqa: E402

from torch_npu.compiler.inductor import mlir as mlir_backend  # noqa: E402
from torch_npu.compiler.inductor.mlir.index_math import IndexMath  # noqa: E402
from torch_npu.compiler.inductor.mlir.kernel_emitter import KernelEmitter  # noqa: E402
from torch_npu.compiler.inductor.mlir.launcher import MlirKernel  # noqa: E402

X, Y = sympy_index_symbol("x0"), sympy_index_symbol("x1")
N0, N1 = 13, 4


def _rational(a, b):
    return F.IntTrueDiv(a, b)


# name -> (expression, the function it must contain)
EXPRESSIONS = {
    "FloorDiv": (F.FloorDiv(X - 7, Y + 2), F.FloorDiv),
    # A clean division's operands divide exactly where Inductor emits one; here, as in
    # Inductor's C++, it is a truncating division of non-negative operands.
    "CleanDiv": (F.CleanDiv(X + 3, Y + 1), F.CleanDiv),
    "CeilDiv": (F.CeilDiv(X - 5, Y + 3), F.FloorDiv),
    "ModularIndexing": (F.ModularIndexing(X + Y, Y + 1, 5), F.ModularIndexing),
    "PythonMod": (F.PythonMod(X - 7, Y + 2), F.PythonMod),
    "Mod": (F.Mod(X + Y, Y + 3), F.Mod),
    "sympy.Mod": (sympy.Mod(X - 7, Y + 2), sympy.Mod),
    "Min": (F.Min(X, 2 * Y + 1), F.Min),
    "Max": (F.Max(X - 3, Y, 2), F.Max),
    "Abs": (sympy.Abs(X - 3 * Y - 2), sympy.Abs),
    "Where": (F.Where(sympy.Lt(X, 2 * Y), X, Y + 10), F.Where),
    "Where_and_or_not": (F.Where(sympy.Or(sympy.And(sympy.Ge(X, Y), sympy.Ne(X, 5)),
                                          sympy.Not(sympy.Gt(X, 2))), X + 1, -Y), F.Where),
    "Where_eq_le": (F.Where(sympy.Or(sympy.Eq(X, Y), sympy.Le(X, 1)), 7, X), F.Where),
    "Piecewise": (sympy.Piecewise((X, sympy.Lt(X, 3)), (Y, sympy.Ge(X, 9)), (X + Y, True)), sympy.Piecewise),
    "PowByNatural_constant": (F.PowByNatural(X - 6, 3), sympy.Pow),  # sympy makes it a Pow
    "PowByNatural_runtime": (F.PowByNatural(X - 6, Y), F.PowByNatural),
    "Pow": (sympy.Pow(X - 6, 2) + Y, sympy.Pow),
    "LShift": (F.LShift(X - 6, Y), F.PowByNatural),
    "RShift": (F.RShift(X - 6, Y), F.FloorDiv),
    "bitwise_and": (F.BitwiseFn_bitwise_and(X - 6, Y + 5), F.BitwiseFn_bitwise_and),
    "bitwise_or": (F.BitwiseFn_bitwise_or(X - 6, Y), F.BitwiseFn_bitwise_or),
    "bitwise_xor": (F.BitwiseFn_bitwise_xor(X - 6, 3 * Y), F.BitwiseFn_bitwise_xor),
    "Identity": (F.Identity(X + Y), F.Identity),
    "FloorToInt": (F.FloorToInt(_rational(X - 7, Y + 2)), F.FloorToInt),
    "CeilToInt": (F.CeilToInt(_rational(X - 7, Y + 2)), F.CeilToInt),
    "TruncToInt": (F.TruncToInt(_rational(X - 7, Y + 2)), F.TruncToInt),
    "RoundToInt": (F.RoundToInt(_rational(X, 4)), F.RoundToInt),
    "RoundToInt_FloatTrueDiv_ToFloat": (F.RoundToInt(F.FloatTrueDiv(F.ToFloat(X - 6), sympy.Float(2.0))),
                                        F.FloatTrueDiv),
    "FloorToInt_FloatPow": (F.FloorToInt(F.FloatPow(F.ToFloat(X), sympy.Float(0.5))), F.FloatPow),
}


def _run_kernel(expr) -> torch.Tensor:
    e = KernelEmitter()
    e._open_loops([X, Y], [N0, N1], 0, 0, False)
    value = e.b.assign(f"arith.index_cast {e.index(expr)} : index to i64")
    flat = e.index(X * N1 + Y)
    e.b.emit(f"memref.store {value}, %out[{flat}] : memref<?xi64>")
    e._close_loops(2)
    src = "\n".join(["func.func @_mlir_kernel(%out: memref<?xi64>, %lo: i64, %hi: i64) {"]
                    + e.b.prologue + e.b.lines + ["  return", "}", ""])
    out = torch.full((N0 * N1,), -12345, dtype=torch.int64)
    MlirKernel("t", src)(out)
    return out.view(N0, N1)


def _sympy_values(expr) -> torch.Tensor:
    return torch.tensor([[int(expr.subs({X: i, Y: j})) for j in range(N1)] for i in range(N0)])


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_index_function_kernel_equals_sympy(name):
    expr, function = EXPRESSIONS[name]
    assert expr.has(function) or any(isinstance(a, function) for a in sympy.preorder_traversal(expr)), (
        f"{name}: sympy simplified {function.__name__} away: {expr}")
    want = _sympy_values(expr)
    got = _run_kernel(expr)
    assert torch.equal(got, want), f"{name}: {expr}\n{got}\n{want}"


def test_unsupported_index_function_is_a_clear_fallback_reason():
    class NotAnIndexFunction(sympy.Function):
        is_integer = True

    with pytest.raises(mlir_backend.fallback.MlirUnsupported, match="NotAnIndexFunction"):
        _run_kernel(NotAnIndexFunction(X))


def _t5_buckets(query_length: int, key_length: int, num_buckets: int = 8, max_distance: int = 20):
    # transformers' T5Attention._relative_position_bucket (bidirectional), over aranges.
    context = torch.arange(query_length, device="npu")[:, None]
    memory = torch.arange(key_length, device="npu")[None, :]
    relative = memory - context
    num_buckets //= 2
    buckets = (relative > 0).to(torch.long) * num_buckets
    relative = torch.abs(relative)
    max_exact = num_buckets // 2
    is_small = relative < max_exact
    large = max_exact + (torch.log(relative.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    buckets = buckets + torch.where(is_small, relative, large)
    # floor division, Python modulus and clamps of index values, in the same graph
    extra = (relative // 3) + (relative - 7) % 4 + torch.clamp(memory - context, -2, 3)
    return buckets, extra


def test_t5_relative_position_buckets_compile_without_fallback(monkeypatch):
    seen = set()
    translate = IndexMath._index

    def recording(self, expr):
        seen.add(type(expr).__name__)
        return translate(self, expr)

    monkeypatch.setattr(IndexMath, "_index", recording)
    mlir_backend.reset_fallback_stats()
    want = _t5_buckets(9, 11)
    compiled = torch.compile(_t5_buckets, options={"npu_backend": "mlir", "fx_graph_cache": False})
    got = compiled(9, 11)
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), w.cpu())
    stats = mlir_backend.fallback_stats()
    assert stats["fallbacks"] == 0, stats["reasons"]
    assert stats["mlir_kernels"] > 0
    assert "Abs" in seen, seen
