"""One fused Inductor kernel as an MLIR function: loop nests, memory access, reductions.

The emitter is the ops handler Inductor's loop bodies run against (`node._body(...)`
under `V.set_ops_handler`), so each scheduler node's loop IR becomes MLIR directly;
there is no FX graph per kernel. Layout follows Inductor's C++ kernels:

- a scheduler node group has pointwise sizes `group` and reduction sizes `rgroup`;
  one loop nest runs over `group`, with an inner nest over `rgroup` whose reductions
  are `scf.for` iter_args; nodes of sizes (group, ()) run after the inner nest;
- buffers are flat `memref<?xT>` indexed by Inductor's own index expressions;
- every buffer a kernel writes stays materialized (no kernel-local buffers), so nests of
  an outer-loop-fused node can simply run one after the other.

Anything outside what is implemented raises MlirUnsupported and the scheduler emits the
default C++ kernel for that node instead.
"""

import contextlib
import itertools

import sympy
import torch
from torch._inductor.codegen.common import KernelArgs
from torch._inductor.sizevars import SimplifyIndexing
from torch._inductor.utils import sympy_index_symbol
from torch._inductor.virtualized import V

from .dtypes import compute_dtype, compute_type, float_literal, int_limits, is_float, memory_type
from .fallback import MlirUnsupported
from .fast_math import FastMath
from .index_math import IndexMath
from .narrow_floats import NARROW_TYPES, narrow, widen
from .random_ops import RandomOps
from .ssa import SsaBuilder, Val
from .value_ops import ValueOps

_SIMPLE_REDUCTIONS = ("sum", "prod", "max", "min", "any", "xor_sum")


class _Accumulator:
    __slots__ = ("mlir_type", "init", "next")

    def __init__(self, mlir_type, init):
        self.mlir_type = mlir_type
        self.init = init
        self.next = None


class _ReductionNest:
    """State of the reduction loops being emitted for one scheduler node group."""

    def __init__(self, nest_id, depth, rvars, rsizes):
        self.nest_id = nest_id
        self.depth = depth
        self.rvars = rvars
        self.rsizes = rsizes
        self.accumulators: list = []
        self.suffix: list = []  # lines after the reduction loops (store_reduction)
        self.outer_scopes = None
        self.outer_indent = 0

    def current(self, k):
        return f"%ra{self.nest_id}_{self.depth - 1}_{k}"

    def result(self, k):
        return f"%rr{self.nest_id}_0#{k}"


class KernelEmitter(IndexMath, RandomOps, FastMath, ValueOps):
    def __init__(self):
        self.b = SsaBuilder()
        self.args = KernelArgs()
        self.symbols: dict = {}  # sympy loop/indirect symbol -> SSA index value
        self._nests = itertools.count()
        self._indirect = itertools.count()
        self.rnest = None
        self.outer_extents: list = []  # first pointwise size of each nest (None: no pointwise loop)
        self.work = sympy.Integer(1)
        self.has_atomic_store = False

    # structure
    def emit_nest(self, nodes, shared=()) -> None:
        """Emit one scheduler node group; `shared`: symbols of already open outer loops."""
        from torch._inductor.scheduler import SchedulerNode

        for node in nodes:
            if not isinstance(node, SchedulerNode) or node.is_template():
                raise MlirUnsupported(f"node kind {type(node).__name__}")
        sizes = [node.group[1] for node in nodes]
        group, rgroup = max(sizes, key=lambda s: len(s[1]))
        nid = next(self._nests)
        xs = list(shared) + [sympy_index_symbol(f"x{nid}_{i}") for i in range(len(shared), len(group))]
        rs = [sympy_index_symbol(f"r{nid}_{i}") for i in range(len(rgroup))]
        inner, suffix = [], []
        for node, s in zip(nodes, sizes):
            if s in ((group, rgroup), (tuple(group) + tuple(rgroup), ())):
                if suffix:
                    raise MlirUnsupported("node order: inner node after a suffix node")
                inner.append(node)
            elif s == (group, ()):
                suffix.append(node)
            else:
                raise MlirUnsupported("nodes with unrelated loop ranges")
        ranges = dict(zip(xs, group)) | dict(zip(rs, rgroup))
        work = sympy.Integer(1)
        for size in itertools.chain(group, rgroup):
            work = work * size
        self.work = sympy.Max(self.work, work) if self.work != 1 else work
        if not shared:
            self.outer_extents.append(group[0] if group else None)
        opened = self._open_loops(xs[len(shared):], group[len(shared):], nid, len(shared), not shared)
        if rgroup:
            self._emit_reduction_nest(nid, inner, xs, rs, rgroup, ranges)
        else:
            for node in inner:
                self._run(node, xs, [], ranges)
        for node in suffix:
            self._run(node, xs, [], ranges)
        self._close_loops(opened)

    def emit_outer_fused(self, groups, depth) -> None:
        """Node groups sharing their first `depth` loops (Inductor's outer-loop fusion):
        one shared outer nest, each group's remaining loops inside, so a row's data is
        still in cache when the next group reads it."""
        node_lists = [g.get_nodes() for g in groups]
        firsts = [max((n.group[1] for n in nodes), key=lambda s: len(s[1]))[0] for nodes in node_lists]
        outer = tuple(firsts[0][:depth])
        if depth < 1 or any(len(f) < depth or tuple(f[:depth]) != outer for f in firsts):
            for nodes in node_lists:
                self.emit_nest(nodes)
            return
        nid = next(self._nests)
        syms = [sympy_index_symbol(f"x{nid}_{i}") for i in range(depth)]
        self.outer_extents.append(outer[0])
        opened = self._open_loops(syms, outer, nid, 0, True)
        for nodes in node_lists:
            self.emit_nest(nodes, shared=syms)
        self._close_loops(opened)

    def _open_loops(self, syms, sizes, nid, first_index, split_first):
        c0, c1 = self.b.index_constant(0), self.b.index_constant(1)
        for k, (sym, size) in enumerate(zip(syms, sizes)):
            i = first_index + k
            name = f"%x{nid}_{i}"
            lo, hi = c0, self.index(size)
            if i == 0 and split_first:
                # the outermost loop runs the [lo, hi) slice the launcher asks for (threads)
                lo = self._range_bound("lo")
                hi = self.b.assign(f"arith.minsi {self._range_bound('hi')}, {hi} : index", "i")
            self.b.emit(f"scf.for {name} = {lo} to {hi} step {c1} {{")
            self.symbols[sym] = name
            self.b.push_scope()
        return len(syms)

    def _close_loops(self, count):
        for _ in range(count):
            self.b.pop_scope()
            self.b.emit("}")

    def _emit_reduction_nest(self, nid, inner, xs, rs, rgroup, ranges):
        b = self.b
        c0, c1 = b.index_constant(0), b.index_constant(1)
        bounds = [self.index(s) for s in rgroup]
        nest = _ReductionNest(nid, len(rgroup), rs, rgroup)
        nest.outer_scopes = list(b.scopes)
        nest.outer_indent = b.indent
        for j, sym in enumerate(rs):
            self.symbols[sym] = f"%r{nid}_{j}"
        saved_lines = b.lines
        b.lines = []
        b.scopes.append({})
        b.indent += len(rgroup)
        self.rnest = nest
        try:
            for node in inner:
                self._run(node, xs, rs, ranges)
        finally:
            self.rnest = None
            body = b.lines
            b.lines = saved_lines
            b.scopes.pop()
            b.indent -= len(rgroup)
        accs = nest.accumulators
        k_count = len(accs)
        types = ", ".join(a.mlir_type for a in accs)
        for j in range(nest.depth):
            rvar = f"%r{nid}_{j}"
            if k_count:
                inits = ", ".join(
                    f"%ra{nid}_{j}_{k} = " + (a.init if j == 0 else f"%ra{nid}_{j - 1}_{k}")
                    for k, a in enumerate(accs)
                )
                b.emit(
                    f"%rr{nid}_{j}:{k_count} = scf.for {rvar} = {c0} to {bounds[j]} step {c1} "
                    f"iter_args({inits}) -> ({types}) {{"
                )
            else:
                b.emit(f"scf.for {rvar} = {c0} to {bounds[j]} step {c1} {{")
            b.indent += 1
        b.lines.extend(body)
        for j in reversed(range(nest.depth)):
            if k_count:
                if j == nest.depth - 1:
                    vals = [a.next for a in accs]
                else:
                    vals = [f"%rr{nid}_{j + 1}#{k}" for k in range(k_count)]
                b.emit(f"scf.yield {', '.join(vals)} : {types}")
            b.indent -= 1
            b.emit("}")
        b.lines.extend(nest.suffix)

    def _range_bound(self, which):
        key = ("range", which)
        hit = self.b.scopes[0].get(key)
        if hit is None:
            hit = self.b.fresh(which)
            self.b.prologue.append(f"  {hit} = arith.index_cast %{which} : i64 to index")
            self.b.scopes[0][key] = hit
        return hit

    def parallel_extent(self):
        """The outermost pointwise extent the launcher may split across threads, or None.

        Splitting is safe when every nest iterates the same outermost variable and writes
        only plainly (no accumulating stores), as for Inductor's own OpenMP C++ loops.
        """
        first = self.outer_extents[0] if self.outer_extents else None
        if first is None or self.has_atomic_store:
            return None
        if any(e is None or sympy.simplify(e - first) != 0 for e in self.outer_extents):
            return None
        return first

    def _run(self, node, xs, rs, ranges) -> None:
        with V.set_ops_handler(SimplifyIndexing(self, ranges)):
            node._body(xs, rs)

    @contextlib.contextmanager
    def _after_reduction_loops(self):
        """Emit into the code that follows the reduction loops of the current nest."""
        nest, b = self.rnest, self.b
        saved = (b.lines, b.scopes, b.indent)
        b.lines, b.scopes, b.indent = nest.suffix, nest.outer_scopes, nest.outer_indent
        try:
            yield
        finally:
            b.lines, b.scopes, b.indent = saved

    def finish(self):
        """-> (MLIR source, argument kinds, wrapper call args, arg types).

        Kinds: 't' tensor, 'i' size; then the launcher-only 'x' (outermost extent, absent
        when the kernel must not be split) and 'w' (elements of work).
        """
        arg_defs, call_args, _, arg_types = self.args.python_argdefs()
        params, kinds = [], []
        for arg, dtype in zip(arg_defs, arg_types):
            if isinstance(dtype, torch.dtype):
                params.append(f"%{arg.name}: memref<?x{memory_type(dtype)}>")
                kinds.append("t")
            else:
                params.append(f"%{arg.name}: i64")
                kinds.append("i")
        params += ["%lo: i64", "%hi: i64"]
        call_args = list(call_args)
        extent = self.parallel_extent()
        if extent is not None:
            kinds.append("x")
            call_args.append(extent)
            kinds.append("w")
            call_args.append(self.work)
        src = "\n".join(
            [f"func.func @_mlir_kernel({', '.join(params)}) {{"]
            + self.b.prologue
            + self.b.lines
            + ["  return", "}", ""]
        )
        return src, "".join(kinds), call_args, arg_types

    # memory
    @staticmethod
    def _storage_name(name):
        """The buffer whose memory `name` denotes (a mutation's output names its target)."""
        return V.graph.scheduler.mutation_real_name.get(name, name)

    def load(self, name, index):
        key = ("mem", self._storage_name(name), index)
        hit = self.b.lookup(key)
        if hit is not None:
            return hit
        if name in V.graph.removed_buffers:
            raise MlirUnsupported("load of a kernel-local buffer")
        dtype = V.graph.get_dtype(name)
        mt = memory_type(dtype)
        arg = self.args.input(name)
        raw = self.b.assign(f"memref.load %{arg}[{self.index(index)}] : memref<?x{mt}>")
        if dtype == torch.bool:
            zero = self.b.constant("0", "i8")
            raw = self.b.assign(f"arith.cmpi ne, {raw}, {zero} : i8")
        elif mt in NARROW_TYPES:
            raw = widen(self.b, raw, mt)
        val = Val(raw, compute_dtype(dtype))
        self.b.remember(key, val)
        return val

    def store(self, name, index, value, mode=None):
        if mode not in (None, "atomic_add"):
            raise MlirUnsupported(f"store mode {mode}")
        dtype = V.graph.get_dtype(name)
        value = self._convert(self._lift(value), compute_dtype(dtype))
        storage = self._storage_name(name)
        if mode == "atomic_add":
            self.has_atomic_store = True
            self.b.forget(lambda k: k[0] == "mem" and k[1] == storage)
            value = self.add(self.load(name, index), value)
        if name in V.graph.removed_buffers:
            self.b.remember(("mem", storage, index), value)
            return None
        self._store_raw(name, index, value, dtype)
        # a store may alias any cached load of the same memory at another index
        self.b.forget(lambda k: k[0] == "mem" and k[1] == storage)
        self.b.remember(("mem", storage, index), value)
        return None

    def _store_raw(self, name, index, value, dtype):
        mt = memory_type(dtype)
        raw = value.name
        if dtype == torch.bool:
            raw = self.b.assign(f"arith.extui {raw} : i1 to i8")
        elif mt in NARROW_TYPES:
            raw = narrow(self.b, raw, mt)
        arg = self.args.output(name)
        self.b.emit(f"memref.store {raw}, %{arg}[{self.index(index)}] : memref<?x{mt}>")

    def store_reduction(self, name, index, value):
        if self.rnest is None:
            return self.store(name, index, value)
        with self._after_reduction_loops():
            return self.store(name, index, value)

    def index_expr(self, expr, dtype):
        if is_float(dtype) and not expr.is_integer:
            return self._convert(self._float_expr(expr), compute_dtype(dtype))
        idx = self.index(expr)
        v = Val(self.b.assign(f"arith.index_cast {idx} : index to i64"), torch.int64)
        return self._convert(v, compute_dtype(dtype))

    def _float_expr(self, expr):
        """A real-valued size expression (e.g. 1/numel under dynamic shapes) in f64."""
        from torch.utils._sympy.functions import FloatPow, FloatTrueDiv, IntTrueDiv, ToFloat

        f64 = torch.float64
        if expr.is_integer:
            return self._convert(self.index_expr(expr, torch.int64), f64)
        if expr.is_Number:
            return self.constant(float(expr), f64)
        if isinstance(expr, (FloatTrueDiv, IntTrueDiv)) or (
            isinstance(expr, sympy.Pow) and expr.exp == -1
        ):
            num, den = (expr.args if not isinstance(expr, sympy.Pow) else (sympy.Integer(1), expr.base))
            return self.truediv(self._float_expr(num), self._float_expr(den))
        if isinstance(expr, ToFloat):
            return self._float_expr(expr.args[0])
        if isinstance(expr, FloatPow):
            return self.pow(self._float_expr(expr.args[0]), self._float_expr(expr.args[1]))
        if isinstance(expr, (sympy.Add, sympy.Mul)):
            vals = [self._float_expr(a) for a in expr.args]
            acc = vals[0]
            for v in vals[1:]:
                acc = self.add(acc, v) if isinstance(expr, sympy.Add) else self.mul(acc, v)
            return acc
        raise MlirUnsupported(f"float index expression {type(expr).__name__}")

    def indirect_indexing(self, x, size, check=True, wrap_neg=True):
        x = self._lift(x)
        if is_float(x.dtype) or x.dtype == torch.bool:
            raise MlirUnsupported(f"indirect index of dtype {x.dtype}")
        idx = self.b.assign(f"arith.index_cast {x.name} : {compute_type(x.dtype)} to index", "i")
        if wrap_neg:
            c0 = self.b.index_constant(0)
            neg = self.b.assign(f"arith.cmpi slt, {idx}, {c0} : index")
            wrapped = self.b.assign(f"arith.addi {idx}, {self.index(size)} : index", "i")
            idx = self.b.assign(f"arith.select {neg}, {wrapped}, {idx} : index", "i")
        sym = sympy_index_symbol(f"indirect{next(self._indirect)}")
        self.symbols[sym] = idx
        return sym

    def check_bounds(self, expr, size, lower, upper):
        return None

    def masked(self, mask, body, other):
        mask = self._convert(self._lift(mask), torch.bool)
        b = self.b
        saved = b.lines
        b.lines = []
        b.push_scope()
        b.indent += 1
        try:
            result = body()
        finally:
            region = b.lines
            b.lines = saved
            b.indent -= 1
            b.pop_scope()
        if not isinstance(result, Val):
            raise MlirUnsupported("masked body without a single value")
        other_val = self._lift(other, result.dtype)
        other_val = self._convert(other_val, result.dtype)
        t = compute_type(result.dtype)
        name = b.fresh("m")
        b.emit(f"{name} = scf.if {mask.name} -> ({t}) {{")
        b.lines.extend(region)
        b.emit(f"  scf.yield {result.name} : {t}")
        b.emit("} else {")
        b.emit(f"  scf.yield {other_val.name} : {t}")
        b.emit("}")
        return Val(name, result.dtype)

    # reductions
    def reduction(self, dtype, src_dtype, reduction_type, value):
        nest = self.rnest
        if nest is None:
            raise MlirUnsupported("reduction outside a reduction loop")
        values = value if isinstance(value, tuple) else (value,)
        key = ("red", reduction_type, tuple(getattr(v, "name", v) for v in values))
        hit = self.b.scopes[-1].get(key)
        if hit is not None:
            return hit
        if reduction_type in _SIMPLE_REDUCTIONS:
            result = self._simple_reduction(nest, dtype, reduction_type, values[0])
        elif reduction_type in ("argmax", "argmin"):
            result = self._arg_reduction(nest, reduction_type, values[0])
        elif reduction_type == "welford_reduce":
            result = self._moments(nest, self._floating(values[0]))
        elif reduction_type == "welford_combine":
            result = self._welford(nest, None, values)
        else:
            raise MlirUnsupported(f"reduction {reduction_type}")
        self.b.scopes[-1][key] = result
        return result

    def _new_acc(self, nest, dtype, init_value):
        if dtype == torch.bool:
            init = self.b.constant("true" if init_value else "false", "i1")
        elif is_float(dtype):
            init = self.b.constant(float_literal(init_value, dtype), compute_type(dtype))
        else:
            init = self.b.constant(str(int(init_value)), compute_type(dtype))
        nest.accumulators.append(_Accumulator(compute_type(dtype), init))
        k = len(nest.accumulators) - 1
        return k, Val(nest.current(k), dtype)

    def _simple_reduction(self, nest, dtype, reduction_type, value):
        dtype = compute_dtype(dtype)
        value = self._convert(self._lift(value), dtype)
        t = compute_type(dtype)
        if dtype == torch.bool:
            reduction_type = {"max": "any", "sum": "any", "min": "all", "prod": "all"}.get(
                reduction_type, reduction_type
            )
        if is_float(dtype):
            init = {"sum": 0.0, "xor_sum": None, "prod": 1.0, "max": float("-inf"), "min": float("inf")}[
                reduction_type
            ]
        elif dtype == torch.bool:
            init = {"any": False, "all": True, "xor_sum": False}[reduction_type]
        else:
            lo, hi = int_limits(dtype)
            init = {"sum": 0, "xor_sum": 0, "prod": 1, "max": lo, "min": hi, "any": 0}[reduction_type]
        if init is None:
            raise MlirUnsupported(f"{reduction_type} on {dtype}")
        k, acc = self._new_acc(nest, dtype, init)
        # reassoc lets LLVM vectorize float sum/prod loops (partial sums, like the C++ kernels)
        fop = {"sum": "arith.addf", "prod": "arith.mulf", "max": "arith.maximumf", "min": "arith.minimumf"}
        iop = {"sum": "arith.addi", "prod": "arith.muli", "max": "arith.maxsi", "min": "arith.minsi",
               "xor_sum": "arith.xori", "any": "arith.ori", "all": "arith.andi"}
        if is_float(dtype):
            op = fop.get(reduction_type)
            if op is None:
                raise MlirUnsupported(f"{reduction_type} on {dtype}")
            nxt = self.b.assign(f"{op} {acc.name}, {value.name} fastmath<reassoc> : {t}")
        else:
            nxt = self.b.assign(f"{iop[reduction_type]} {acc.name}, {value.name} : {t}")
        nest.accumulators[k].next = nxt
        return Val(nest.result(k), dtype)

    def _arg_reduction(self, nest, reduction_type, value):
        value = self._lift(value)
        dtype = value.dtype
        if dtype == torch.bool:
            value = self._convert(value, torch.int32)
            dtype = torch.int32
        if is_float(dtype):
            init = float("-inf") if reduction_type == "argmax" else float("inf")
        else:
            lo, hi = int_limits(dtype)
            init = lo if reduction_type == "argmax" else hi
        kv, acc_v = self._new_acc(nest, dtype, init)
        ki, acc_i = self._new_acc(nest, torch.int64, 0)
        flat = sympy.Integer(0)
        stride = sympy.Integer(1)
        for sym, size in reversed(list(zip(nest.rvars, nest.rsizes))):
            flat = flat + sym * stride
            stride = stride * size
        ridx = self.index_expr(flat, torch.int64)
        better = self.gt(value, acc_v) if reduction_type == "argmax" else self.lt(value, acc_v)
        if is_float(dtype):
            better = self.logical_or(better, self.logical_and(self.isnan(value), self.logical_not(self.isnan(acc_v))))
        nest.accumulators[kv].next = self.where(better, value, acc_v).name
        nest.accumulators[ki].next = self.where(better, ridx, acc_i).name
        return Val(nest.result(ki), torch.int64)

    def _moments(self, nest, x):
        """welford_reduce as f64 sums of x and x*x: (mean, m2, count) like Welford's, but
        the loop-carried updates are plain reassociable adds, so LLVM vectorizes them
        (a Welford update divides on every element and serializes the loop)."""
        f64 = torch.float64
        xd = self._convert(x, f64)
        ks, acc_s = self._new_acc(nest, f64, 0.0)
        kq, acc_q = self._new_acc(nest, f64, 0.0)
        nest.accumulators[ks].next = self.b.assign(f"arith.addf {acc_s.name}, {xd.name} fastmath<reassoc> : f64")
        sq = self.mul(xd, xd)
        nest.accumulators[kq].next = self.b.assign(f"arith.addf {acc_q.name}, {sq.name} fastmath<reassoc> : f64")
        count = sympy.Integer(1)
        for size in nest.rsizes:
            count = count * size
        with self._after_reduction_loops():
            n = self._convert(self.index_expr(count, torch.int64), f64)
            total, squares = Val(nest.result(ks), f64), Val(nest.result(kq), f64)
            mean = self.truediv(total, n)
            m2 = self.maximum(self.sub(squares, self.mul(total, mean)), self.constant(0.0, f64))
            return tuple(self._convert(v, x.dtype) for v in (mean, m2, n))

    def _welford(self, nest, x, parts):
        dtype = x.dtype if x is not None else compute_dtype(self._floating(parts[0]).dtype)
        km, mean = self._new_acc(nest, dtype, 0.0)
        k2, m2 = self._new_acc(nest, dtype, 0.0)
        kw, weight = self._new_acc(nest, dtype, 0.0)
        if x is not None:
            w_new = self.add(weight, self.constant(1.0, dtype))
            delta = self.sub(x, mean)
            mean_new = self.add(mean, self.truediv(delta, w_new))
            m2_new = self.add(m2, self.mul(delta, self.sub(x, mean_new)))
        else:
            xm, xm2, xw = (self._convert(self._floating(p), dtype) for p in parts)
            w_new = self.add(weight, xw)
            zero = self.constant(0.0, dtype)
            nw = self.where(self.eq(w_new, zero), zero, self.truediv(xw, w_new))
            delta = self.sub(xm, mean)
            mean_new = self.add(mean, self.mul(delta, nw))
            m2_new = self.add(self.add(m2, xm2), self.mul(self.mul(delta, delta), self.mul(weight, nw)))
        nest.accumulators[km].next = mean_new.name
        nest.accumulators[k2].next = m2_new.name
        nest.accumulators[kw].next = w_new.name
        return tuple(Val(nest.result(k), dtype) for k in (km, k2, kw))
