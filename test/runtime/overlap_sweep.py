"""Memory-overlap conformance of the npu device over PyTorch's OpInfo database, against cpu.

ATen refuses some aliasing between what an operator writes and what it reads (an output
that overlaps itself, an input that partially overlaps the output) and allows other
aliasing (``x.add_(x)``). The npu device must apply the same rule: raise exactly where cpu
raises (same exception type), and otherwise give cpu's values. For every OpInfo operator
with an ``out=`` variant or an in-place variant, each sample (float32, or the first dtype
the operator has on cpu) is called with its written tensor aliasing its first input:

- ``none``: separate memory (the plain call);
- ``full``: the same tensor (``x.op_(x)``, ``op(x, out=x)``);
- ``partial``: two views of one buffer, shifted by one element;
- ``internal``: a written tensor that overlaps itself (stride 0, from ``expand``);
- ``disjoint``: two views of one buffer that do not overlap.

A case agrees when both devices raise the same exception type, or neither raises and
every tensor it was given and the value it returned have the same geometry (sizes,
strides, offset, dtype) and equal values (``torch.testing.assert_close``, NaNs equal;
geometry only for operators whose results hold unwritten memory, like ``resize_``).

A case is built once on cpu and copied to npu with the same storage sharing and geometry
(``copy_sharing_storage``), then run on both devices from the same seed, on one CPU
thread (aliasing cpu allows may leave values that depend on the order of the writes).

The full sweep runs each operator in forked children (a case that crashes is recorded and
the sweep resumes after it; a timeout is counted);
the parent never initialises npu. ``test_overlap_sweep.py`` runs a fixed sample in CI.

    python test/runtime/overlap_sweep.py [--ops NAME,...] [--timeout S] [--json FILE] [--capture]

``--capture`` also records each case inside an NPU graph capture: the capture must raise
cpu's overlap error exactly where cpu raises one (when the operator is recorded).
"""
from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

import torch

import torch_npu  # noqa: F401  (registers the npu device; initialises nothing)

CASES = ("none", "full", "partial", "internal", "disjoint")
# Operators whose results hold memory nothing wrote (resize_ growing a storage): only
# their geometry is compared.
UNINITIALISED_VALUES = frozenset(
    {"resize_", "resize_as_", "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
     "new_empty_strided"}
)
MAX_SAMPLES = 4
SEED = 1234
# Operators whose cpu out= kernel writes past an out tensor that overlaps itself (stride 0,
# from expand), corrupting the process: cpu is not run for those cases (unless the out is
# empty: nothing is written), and npu must refuse
# them with ATen's internal-overlap error (CUDA has no narrow_copy.out kernel, and its
# avg_pool3d leaves the aliased elements to whichever thread wrote last).
CPU_WRITES_PAST_SELF_OVERLAPPING_OUT = frozenset({"narrow_copy", "nn.functional.avg_pool3d"})


def op_id(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def overlap_ops() -> list[Any]:
    """The OpInfo entries with an out= or an in-place variant."""
    from torch.testing._internal.common_methods_invocations import op_db

    return [op for op in op_db if op.supports_out or op.inplace_variant is not None]


# ---- building aliasing cases ---------------------------------------------------------


def copy_sharing_storage(obj: Any, device: str, storages: dict | None = None) -> Any:
    """``obj`` (tensors, nested in lists, tuples and dicts) with its tensors copied to
    ``device``: tensors over one storage become views of one new storage, with the same
    sizes, strides and offset, so their aliasing is the same as before."""
    storages = {} if storages is None else storages
    if isinstance(obj, torch.Tensor):
        if obj.layout != torch.strided:
            return obj.to(device)
        t = obj.detach().resolve_conj().resolve_neg() if obj.is_conj() or obj.is_neg() else obj.detach()
        storage = t.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes(), t.device)
        if key not in storages:
            flat = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage)
            storages[key] = flat.to(device, copy=True)
        flat = storages[key]
        typed = torch.empty(0, dtype=t.dtype, device=device).set_(
            flat.untyped_storage(), 0, (storage.nbytes() // t.element_size(),), (1,)
        )
        return typed.as_strided(t.shape, t.stride(), t.storage_offset())
    if isinstance(obj, (list, tuple)):
        moved = [copy_sharing_storage(x, device, storages) for x in obj]
        return type(obj)(moved) if isinstance(obj, tuple) else moved
    if isinstance(obj, dict):
        return {k: copy_sharing_storage(v, device, storages) for k, v in obj.items()}
    return obj


def views_of_one_buffer(a: torch.Tensor, b: torch.Tensor, shift: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Contiguous views of ``a``'s and ``b``'s shapes over one buffer of their dtype, the
    second starting ``shift`` elements after the first; the first is filled with ``a``'s
    values, then the second with ``b``'s (which win where the two overlap)."""
    na, nb = a.numel(), b.numel()
    buf = torch.zeros(max(na, shift + nb), dtype=a.dtype)
    first = buf[:na].view(a.shape)
    second = buf[shift : shift + nb].view(b.shape)
    first.copy_(a)
    second.copy_(b)
    return first, second


def overlap_in_views(na: int, nb: int, shift: int) -> bool:
    """Whether views from ``views_of_one_buffer`` share an element."""
    return na > 0 and nb > 0 and shift < na


def expanded(t: torch.Tensor) -> torch.Tensor | None:
    """A tensor of ``t``'s shape whose first non-trivial dimension has stride 0, or None."""
    for d, size in enumerate(t.shape):
        if size > 1:
            base = t.narrow(d, 0, 1).clone()
            return base.expand(t.shape)
    return None


@dataclass
class Case:
    """One call: ``fn(*args, **kwargs)``; ``written`` names the written tensor's role."""

    kind: str
    variant: str  # "inplace" or "out"
    args: tuple
    kwargs: dict

    def call(self, op: Any) -> Any:
        if self.variant == "inplace":
            return op.inplace_variant(*self.args, **self.kwargs)
        return op(*self.args, **self.kwargs)


def first_tensor_arg(args: tuple, like: torch.Tensor) -> int | None:
    """The index of the first argument that is a strided tensor of ``like``'s dtype."""
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.layout == torch.strided and a.dtype == like.dtype:
            return i
    return None


def first_input_tensor(x: Any) -> torch.Tensor | None:
    """The tensor an out= tensor is made to alias: the input, or the first of a list."""
    if isinstance(x, (list, tuple)):
        x = x[0] if x else None
    return x if isinstance(x, torch.Tensor) and x.layout == torch.strided else None


def with_first_input(x: Any, t: torch.Tensor) -> Any:
    if isinstance(x, (list, tuple)):
        return type(x)([t, *x[1:]])
    return t


def inplace_cases(sample: Any) -> Iterator[Case]:
    x = sample.input
    if not isinstance(x, torch.Tensor) or x.layout != torch.strided:
        return
    args, kwargs = tuple(sample.args), dict(sample.kwargs)
    yield Case("none", "inplace", (x.clone(), *args), kwargs)
    e = expanded(x)
    if e is not None:
        yield Case("internal", "inplace", (e, *args), kwargs)
    j = first_tensor_arg(args, x)
    if j is None:
        return
    other = args[j]
    if other.shape == x.shape:
        y = x.clone()
        yield Case("full", "inplace", (y, *args[:j], y, *args[j + 1 :]), kwargs)
    # self is the later view, the input the earlier one.
    if overlap_in_views(other.numel(), x.numel(), 1):
        read, written = views_of_one_buffer(other, x, 1)
        yield Case("partial", "inplace", (written, *args[:j], read, *args[j + 1 :]), kwargs)
    if other.numel() > 0:
        read, written = views_of_one_buffer(other, x, other.numel())
        yield Case("disjoint", "inplace", (written, *args[:j], read, *args[j + 1 :]), kwargs)


def out_cases(op: Any, sample: Any, result: Any) -> Iterator[Case]:
    if not isinstance(result, torch.Tensor) or result.layout != torch.strided:
        return  # several outputs or a non-tensor result: not swept
    x = sample.input
    args, kwargs = tuple(sample.args), dict(sample.kwargs)
    yield Case("none", "out", (x, *args), {**kwargs, "out": torch.zeros_like(result)})
    e = expanded(torch.zeros_like(result))
    if e is not None:
        yield Case("internal", "out", (x, *args), {**kwargs, "out": e})
    first = first_input_tensor(x)
    if first is None or first.dtype != result.dtype:
        return
    if first.shape == result.shape and first is x:
        y = x.clone()
        yield Case("full", "out", (y, *args), {**kwargs, "out": y})
    if overlap_in_views(first.numel(), result.numel(), 1):
        read, written = views_of_one_buffer(first, result, 1)
        yield Case("partial", "out", (with_first_input(x, read), *args), {**kwargs, "out": written})
    if first.numel() > 0:
        read, written = views_of_one_buffer(first, result, first.numel())
        yield Case("disjoint", "out", (with_first_input(x, read), *args), {**kwargs, "out": written})


# ---- running a case on both devices ----------------------------------------------------


def run(case: Case, op: Any, device: str) -> tuple[Any, BaseException | None]:
    """Runs ``case`` on ``device`` (a copy with the same aliasing); returns what it left
    in every tensor it was given and what it returned, or the exception it raised."""
    args, kwargs = copy_sharing_storage((case.args, case.kwargs), device)
    if "device" in kwargs:
        kwargs["device"] = device  # factories (arange, zeros, ...) make their result there
    moved = Case(case.kind, case.variant, args, kwargs)
    torch.manual_seed(SEED)
    try:
        with torch.no_grad():
            returned = moved.call(op)
    except Exception as e:  # noqa: BLE001  (every exception type is compared)
        return None, e
    touched = [t for t in _tensors((args, kwargs))]
    return (_geometry((touched, returned)), _to_cpu((touched, returned))), None


def _tensors(obj: Any) -> Iterator[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x)


def _geometry(obj: Any) -> Any:
    """Sizes, strides, offset and dtype of every tensor in ``obj``."""
    if isinstance(obj, torch.Tensor):
        if obj.layout != torch.strided:
            return (tuple(obj.shape), str(obj.layout), str(obj.dtype))
        return (tuple(obj.shape), obj.stride(), obj.storage_offset(), str(obj.dtype))
    if isinstance(obj, (list, tuple)):
        return [_geometry(x) for x in obj]
    return obj


def _to_cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu")
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(x) for x in obj) if isinstance(obj, tuple) else [_to_cpu(x) for x in obj]
    return obj


@dataclass
class Outcome:
    op: str
    variant: str
    kind: str
    cpu: str  # "ok" or the exception type
    npu: str
    agree: bool
    reason: str = ""
    # With ``capture``: "refused" (the capture raised an overlap error), "recorded" (no
    # error), or "aborted" (the capture stopped earlier for another reason, such as a
    # host sync inside a composite operator, where a CUDA capture stops too); "" when
    # not checked.
    capture: str = ""


def is_overlap_refusal(e: BaseException | None) -> bool:
    return isinstance(e, RuntimeError) and str(e).startswith("unsupported operation:")


def capture_outcome(case: Case, op: Any) -> str:
    """What recording ``case`` in an NPU graph capture does (``Outcome.capture``)."""
    args, kwargs = copy_sharing_storage((case.args, case.kwargs), "npu")
    if "device" in kwargs:
        kwargs["device"] = "npu"
    moved = Case(case.kind, case.variant, args, kwargs)
    graph = torch.npu.NPUGraph()
    try:
        with torch.no_grad(), torch.npu.graph(graph):
            moved.call(op)
    except Exception as e:  # noqa: BLE001
        return "refused" if is_overlap_refusal(e) else "aborted"
    finally:
        graph.reset()
    return "recorded"


def compare(case: Case, op: Any, capture: bool = False) -> Outcome:
    # Aliasing that cpu allows can leave order-dependent values (an expanded out= written
    # by several threads): one thread makes the CPU kernel, which npu runs too, deterministic.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if (case.variant == "out" and case.kind == "internal" and op_id(op) in CPU_WRITES_PAST_SELF_OVERLAPPING_OUT
                and case.kwargs["out"].numel() > 0):
            cpu_value, cpu_exc = None, RuntimeError("unsupported operation: more than one element of the written-to "
                                                    "tensor refers to a single memory location (npu's rule; cpu's "
                                                    "kernel would write out of bounds)")
        else:
            cpu_value, cpu_exc = run(case, op, "cpu")
        npu_value, npu_exc = run(case, op, "npu")
    finally:
        torch.set_num_threads(threads)
    captured = capture_outcome(case, op) if capture else ""
    cpu_kind = "ok" if cpu_exc is None else type(cpu_exc).__name__
    npu_kind = "ok" if npu_exc is None else type(npu_exc).__name__
    outcome = Outcome(op_id(op), case.variant, case.kind, cpu_kind, npu_kind, cpu_kind == npu_kind)
    if not outcome.agree:
        raised = cpu_exc if cpu_exc is not None else npu_exc
        side = "cpu" if cpu_exc is not None else "npu"
        outcome.reason = f"only {side} raised: {str(raised).splitlines()[0][:200] if str(raised) else ''}"
    outcome.capture = captured
    cpu_refused = is_overlap_refusal(cpu_exc)
    wrong_capture = (captured == "refused" and not cpu_refused) or (captured == "recorded" and cpu_refused)
    if wrong_capture:
        outcome.agree = False
        outcome.reason = (outcome.reason + "; " if outcome.reason else "") + (
            "the capture recorded what cpu refuses" if cpu_refused else "the capture refused what cpu allows"
        )
    if outcome.agree and cpu_exc is None:
        outcome.reason = value_difference(op, cpu_value, npu_value)
        outcome.agree = not outcome.reason
    return outcome


def value_difference(op: Any, cpu_value: tuple, npu_value: tuple) -> str:
    """Why the (geometry, values) npu left differ from cpu's; "" when they agree."""
    if npu_value[0] != cpu_value[0]:
        return f"geometry differs: npu {npu_value[0]}, cpu {cpu_value[0]}"[:300]
    if op.name in UNINITIALISED_VALUES:
        return ""
    try:
        torch.testing.assert_close(npu_value[1], cpu_value[1], equal_nan=True)
    except Exception as e:  # noqa: BLE001
        return "values differ: " + " ".join(str(e).split())[:200]
    return ""


def sample_dtype(op: Any) -> torch.dtype | None:
    dtypes = op.supported_dtypes("cpu")
    if torch.float32 in dtypes:
        return torch.float32
    ordered = sorted(dtypes, key=str)
    return ordered[0] if ordered else None


def op_cases(op: Any, max_samples: int = MAX_SAMPLES) -> Iterator[tuple[int, Case]]:
    """The aliasing cases of the first ``max_samples`` samples of ``op`` (float32, or the
    first dtype the operator has on cpu), with the index of their sample; the same
    sequence every time."""
    dtype = sample_dtype(op)
    if dtype is None:
        return
    torch.manual_seed(SEED)
    for index, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=False)):
        if index >= max_samples:
            break
        if op.inplace_variant is not None:
            for case in inplace_cases(sample):
                yield index, case
        if op.supports_out:
            try:
                torch.manual_seed(SEED)
                result = op(sample.input, *sample.args, **sample.kwargs)
            except Exception:  # noqa: BLE001  (a sample cpu refuses has nothing to alias)
                continue
            for case in out_cases(op, sample, result):
                yield index, case


def sweep_op(op: Any, max_samples: int = MAX_SAMPLES, capture: bool = False) -> tuple[int, list[Outcome]]:
    """Runs every aliasing case of ``op_cases`` (and, with ``capture``, records it in an
    NPU graph capture too); returns the number of samples used and one outcome per case."""
    samples: set[int] = set()
    outcomes = []
    for index, case in op_cases(op, max_samples):
        samples.add(index)
        outcomes.append(compare(case, op, capture))
    return len(samples), outcomes


# ---- the full sweep, a forked child per operator -----------------------------------------


@dataclass
class OpReport:
    op: str
    status: str  # "done", "timeout", "error"
    samples: int = 0
    outcomes: list[dict] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)  # the cases that killed a child
    detail: str = ""


def _child(op: Any, skip: int, capture: bool, write_fd: int) -> None:
    """Runs the cases of ``op`` after the first ``skip``, writing one JSON line before
    each case (so that the parent knows which one killed the child) and one with its
    outcome."""
    with os.fdopen(write_fd, "w", buffering=1) as out:
        try:
            for n, (index, case) in enumerate(op_cases(op)):
                if n < skip:
                    continue
                out.write(json.dumps({"start": n, "sample": index, "case": f"{case.variant} {case.kind}"}) + "\n")
                out.write(json.dumps({"outcome": asdict(compare(case, op, capture))}) + "\n")
            out.write(json.dumps({"done": True}) + "\n")
        except BaseException as e:  # noqa: BLE001
            detail = f"{type(e).__name__}: {e}"[:300] + " " + traceback.format_exc()[-300:]
            out.write(json.dumps({"error": detail}) + "\n")


def _run_child(op: Any, skip: int, capture: bool, deadline: float, case_timeout: float) -> tuple[list[dict], int]:
    """Runs ``_child`` until it finishes, ``deadline`` passes, or one case takes longer
    than ``case_timeout`` (a child can hang after a CPU kernel corrupted its heap)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            _child(op, skip, capture, write_fd)
        finally:
            os._exit(0)
    os.close(write_fd)
    buffer = b""
    last_activity = time.monotonic()
    with os.fdopen(read_fd, "rb") as f:
        while True:
            left = min(deadline, last_activity + case_timeout) - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([f], [], [], left)
            if ready:
                chunk = os.read(f.fileno(), 1 << 20)
                if not chunk:
                    break
                buffer += chunk
                last_activity = time.monotonic()
    _, status = os.waitpid(pid, 0)
    return [json.loads(line) for line in buffer.decode().splitlines() if line.strip()], status


def sweep_forked(op: Any, timeout: float, capture: bool = False, case_timeout: float = 60.0) -> OpReport:
    """``sweep_op`` in forked children: a case that kills its child (a crash of a CPU
    kernel on some aliasing) is recorded and the sweep goes on in a new child."""
    report = OpReport(op_id(op), "done")
    samples: set[int] = set()
    deadline = time.monotonic() + timeout
    skip = 0
    while True:
        records, status = _run_child(op, skip, capture, deadline, case_timeout)
        started = None
        finished = False
        for r in records:
            if "start" in r:
                started = r
                samples.add(r["sample"])
            elif "outcome" in r:
                report.outcomes.append(r["outcome"])
                started = None
            elif "done" in r:
                finished = True
            elif "error" in r:
                report.status, report.detail, finished = "error", r["error"], True
        if finished:
            break
        if time.monotonic() >= deadline:
            report.status, report.detail = "timeout", f"not finished within {timeout:.0f} s"
            break
        if started is None:
            report.status, report.detail = "error", f"child died outside a case (status {status})"
            break
        how = "hung" if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL else f"child status {status}"
        report.crashed.append(f"sample {started['sample']} {started['case']} ({how})")
        skip = started["start"] + 1
    report.samples = len(samples)
    return report


def summarise(reports: list[OpReport]) -> dict:
    outcomes = [o for r in reports for o in r.outcomes]
    aliasing = [o for o in outcomes if o["kind"] != "none"]
    raised = [o for o in outcomes if o["agree"] and o["cpu"] != "ok"]
    valued = [o for o in outcomes if o["agree"] and o["cpu"] == "ok"]
    return {
        "ops": len(reports),
        "ops_failed": {r.op: f"{r.status}: {r.detail}" for r in reports if r.status != "done"},
        "crashed_cases": {r.op: r.crashed for r in reports if r.crashed},
        "samples": sum(r.samples for r in reports),
        "cases": len(outcomes),
        "aliasing_cases": len(aliasing),
        "by_kind": {k: sum(1 for o in outcomes if o["kind"] == k) for k in CASES},
        "raise_agree": len(raised),
        "value_agree": len(valued),
        "capture_refused_agree": sum(1 for o in outcomes if o.get("capture") == "refused" and o["agree"]),
        "capture_recorded_agree": sum(1 for o in outcomes if o.get("capture") == "recorded" and o["agree"]),
        "capture_aborted_otherwise": sum(1 for o in outcomes if o.get("capture") == "aborted"),
        "disagreements": [o for o in outcomes if not o["agree"]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (name.variant for variants)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per operator")
    parser.add_argument("--json", help="write the summary and per-op reports to this file")
    parser.add_argument("--capture", action="store_true",
                        help="also record each case in an NPU graph capture, which must refuse what cpu refuses")
    ns = parser.parse_args(argv)
    ops = overlap_ops()
    if ns.ops:
        wanted = set(ns.ops.split(","))
        unknown = wanted - {op_id(op) for op in ops}
        if unknown:
            parser.error(f"not OpInfo ops with an out= or in-place variant: {', '.join(sorted(unknown))}")
        ops = [op for op in ops if op_id(op) in wanted]
    reports = []
    started = time.monotonic()
    for i, op in enumerate(ops):
        report = sweep_forked(op, ns.timeout, ns.capture)
        reports.append(report)
        bad = [o for o in report.outcomes if not o["agree"]]
        print(f"[{i + 1}/{len(ops)}] {report.op}: {report.status}, {len(report.outcomes)} cases, "
              f"{len(bad)} disagreements, {len(report.crashed)} crashed", file=sys.stderr, flush=True)
    summary = summarise(reports)
    summary["seconds"] = round(time.monotonic() - started, 1)
    printed = {k: v for k, v in summary.items() if k != "disagreements"}
    printed["disagreements"] = len(summary["disagreements"])
    print(json.dumps(printed, indent=2))
    for o in summary["disagreements"]:
        print(f"DISAGREE {o['op']} {o['variant']} {o['kind']}: cpu={o['cpu']} npu={o['npu']} {o['reason']}")
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"summary": summary, "reports": [asdict(r) for r in reports]}, f, indent=1)
    return 1 if summary["disagreements"] or summary["ops_failed"] or summary["crashed_cases"] else 0


if __name__ == "__main__":
    sys.exit(main())
