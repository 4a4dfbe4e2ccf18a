"""Conformance sweep of the npu device over PyTorch's own OpInfo database, against cpu.

The harness lives with the tests (``test_opinfo_sweep.py`` runs a fixed sample of it);
``bench/opinfo_sweep.py`` runs it over all of ``op_db``.

Every OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` runs its
sample inputs on cpu and on npu copies of them (views keep their storage and geometry),
in a forked child per operator, so a crash is a counted failure instead of a dead run:
float32 forward and backward, and float16, bfloat16, int64, complex64 and bool forward,
for the dtypes the operator supports on cpu. Random operators are compared under the
same stream: npu seeded, cpu loaded with the engine state npu draws from at that seed
(``philox_reference``), so a random call gives both devices the same numbers. A sample agrees when both devices give equal results (default tolerances of
``torch.testing.assert_close``, results on npu) or both raise the same exception type.

A disagreement is charged to npu only when the cpu reference is sound: the cpu call is
repeated (and, for float16/bfloat16, compared with the same operator computed in float32),
and a reference that disagrees with itself or lies far from the float32 result is reported
apart, as "cpu reference unreliable on this CPU" with the CPU's model and flags. Some cpu
kernels are wrong on some CPUs (oneDNN's float16 convolution with one thread on CPUs with
AVX512-FP16): such a sample says nothing about npu, which runs the same kernel.

The parent never initialises npu (a forked child of a process that did may not use it),
and each child reports after every dtype, so a crash or a timeout is charged to the dtype
it happened in and the remaining dtypes run in a fresh child.

    python test/runtime/opinfo_harness.py [--ops NAME,...] [--timeout S] [--json FILE] [--list-disagreements]
                                 [--shard K/N] [--jsonl FILE]

``--shard`` splits the sweep over several processes; ``--summarise FILE...`` merges
their ``--jsonl`` records into one summary.

``NAME`` is an OpInfo name, with ``.variant`` for variants (``as_strided.partial_views``).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import select
import signal
import sys
import time
import traceback
import unittest.mock
import zlib
from typing import Any

import torch

import torch_npu  # noqa: F401  (registers the npu device; initialises nothing)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from philox_reference import seed_one_stream  # noqa: E402

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.complex64, torch.bool)
# Their results are whatever the allocator's memory held: no value to compare.
UNINITIALISED_OUTPUT = frozenset(
    {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}
)


def op_id(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---- moving samples to npu ------------------------------------------------------


def to_npu_preserving_storage(t: torch.Tensor) -> torch.Tensor:
    """An npu tensor with ``t``'s values, storage size, offset and strides (so partial
    views and as_strided read the same memory they read on cpu)."""
    if t.layout != torch.strided:
        return t.to("npu")
    if t.is_conj() or t.is_neg():
        source = t.resolve_conj().resolve_neg()
        return to_npu_preserving_storage(source)
    if t.untyped_storage().nbytes() == 0:
        moved = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="npu")
    else:
        flat = torch.empty(0, dtype=t.dtype).set_(
            t.untyped_storage(), 0, (t.untyped_storage().nbytes() // t.element_size(),), (1,)
        )
        moved = flat.to("npu").as_strided(t.shape, t.stride(), t.storage_offset())
    return moved.detach().requires_grad_(t.requires_grad)


def move(sample: Any, leaves: list[torch.Tensor]) -> Any:
    """``sample`` with its cpu tensors moved to npu (other devices stay: a sample may
    hold them on purpose). Collects the new tensors that require grad in ``leaves``."""

    def fn(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.device.type == "cpu":
            y = to_npu_preserving_storage(x)
            if y.requires_grad:
                leaves.append(y)
            return y
        return x

    moved = sample.transform(fn)
    # Factory operators take the device as a keyword.
    device = moved.kwargs.get("device")
    if device is not None and torch.device(device).type == "cpu":
        moved.kwargs["device"] = "npu"
    return moved


# ---- comparing ------------------------------------------------------------------


def _dense(t: torch.Tensor) -> torch.Tensor:
    if t.layout != torch.strided:
        t = t.to_dense()
    return t.resolve_conj().resolve_neg()


def compare(npu_out: Any, cpu_out: Any, result_device: str = "npu") -> str | None:
    """None when ``npu_out`` matches ``cpu_out``, else what differs. Tensors the cpu call
    returned on cpu must come back on ``result_device``."""
    from torch.utils._pytree import tree_flatten

    npu_leaves, npu_spec = tree_flatten(npu_out)
    cpu_leaves, cpu_spec = tree_flatten(cpu_out)
    if len(npu_leaves) != len(cpu_leaves):
        return f"result structure differs: {npu_spec} vs {cpu_spec}"
    for i, (got, want) in enumerate(zip(npu_leaves, cpu_leaves)):
        if isinstance(want, torch.Tensor):
            if not isinstance(got, torch.Tensor):
                return f"result {i}: {type(got).__name__} instead of a tensor"
            if want.device.type == "cpu" and got.device.type != result_device:
                return f"result {i} is on {got.device}, expected {result_device}"
            if got.dtype != want.dtype or got.shape != want.shape:
                return f"result {i}: {got.dtype}{tuple(got.shape)} vs cpu {want.dtype}{tuple(want.shape)}"
            if got.layout != want.layout:
                return f"result {i}: layout {got.layout} vs cpu {want.layout}"
            try:
                torch.testing.assert_close(_dense(got.detach().cpu()), _dense(want.detach()), equal_nan=True)
            except AssertionError as exc:
                return f"result {i}: " + " ".join(str(exc).split())[:300]
        elif isinstance(want, float) and isinstance(got, float):
            if not (got == want or (got != got and want != want) or abs(got - want) <= 1e-5 * max(1.0, abs(want))):
                return f"result {i}: {got} vs cpu {want}"
        elif got != want:
            return f"result {i}: {got!r} vs cpu {want!r}"
    return None


def call(op: Any, sample: Any, seed: int) -> tuple[Any, BaseException | None]:
    # Random OpInfos seed inside their op (``wrapper_set_seed`` calls torch.manual_seed(42)):
    # that seeding is routed through seed_one_stream too.
    with unittest.mock.patch.object(torch, "manual_seed", seed_one_stream):
        seed_one_stream(seed)
        try:
            return op(sample.input, *sample.args, **sample.kwargs), None
        except Exception as exc:  # an error is a result too: both devices must agree on it
            return None, exc


def differentiable_outputs(out: Any) -> list[torch.Tensor]:
    from torch.utils._pytree import tree_flatten

    return [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.requires_grad]


def backward(outs: list[torch.Tensor], leaves: list[torch.Tensor], seed: int) -> tuple[Any, BaseException | None]:
    gen = torch.Generator().manual_seed(seed)
    cotangents = []
    for t in outs:
        c = torch.randn(t.shape, generator=gen, dtype=t.dtype if t.is_floating_point() or t.is_complex() else torch.float32)
        cotangents.append(c.to(t.device))
    try:
        grads = torch.autograd.grad(outs, leaves, cotangents, allow_unused=True)
        return list(grads), None
    except Exception as exc:
        return None, exc


@dataclasses.dataclass
class Finding:
    """A sample whose npu result differs from cpu's. ``cpu_unreliable`` says why the cpu
    reference cannot be trusted on this CPU (then the sample is reported, not counted)."""

    kind: str  # "forward" or "backward"
    reason: str
    cpu_unreliable: str | None = None


def check_sample(op: Any, sample: Any, seed: int, with_backward: bool,
                 dtype: torch.dtype | None = None) -> list[Finding]:
    """What differs between npu and cpu on ``sample`` (empty when they agree); ``dtype``
    is the dtype the sample was made for."""
    findings: list[Finding] = []
    cpu_out, cpu_exc = call(op, sample, seed)
    leaves: list[torch.Tensor] = []
    npu_sample = move(sample, leaves)
    npu_out, npu_exc = call(op, npu_sample, seed)
    if cpu_exc is not None or npu_exc is not None:
        if cpu_exc is not None and npu_exc is not None and type(cpu_exc) is type(npu_exc):
            return findings
        if npu_exc is not None:
            reason = f"npu raised {type(npu_exc).__name__}: {str(npu_exc).splitlines()[0][:240]}" + (
                f" (cpu raised {type(cpu_exc).__name__})" if cpu_exc is not None else ""
            )
        else:
            reason = f"cpu raised {type(cpu_exc).__name__} but npu did not"
        return [Finding("forward", reason)]
    cpu_processed = sample.output_process_fn_grad(cpu_out)
    npu_processed = npu_sample.output_process_fn_grad(npu_out)
    if op.name not in UNINITIALISED_OUTPUT:
        forward = compare(npu_processed, cpu_processed)
        if forward is not None:
            findings.append(Finding("forward", forward, forward_reference_problem(op, sample, seed, cpu_processed, dtype)))
    if not with_backward:
        return findings
    cpu_leaves = [t for t in _leaves_of(sample) if t.requires_grad]
    cpu_outs = differentiable_outputs(cpu_processed)
    npu_outs = differentiable_outputs(npu_processed)
    if not cpu_outs or not cpu_leaves:
        return findings
    if len(cpu_outs) != len(npu_outs) or len(cpu_leaves) != len(leaves):
        findings.append(Finding("backward", f"differentiable outputs/inputs differ: {len(npu_outs)}/{len(leaves)} "
                                            f"vs {len(cpu_outs)}/{len(cpu_leaves)}"))
        return findings
    cpu_grads, cpu_exc = backward(cpu_outs, cpu_leaves, seed + 1)
    npu_grads, npu_exc = backward(npu_outs, leaves, seed + 1)
    if cpu_exc is not None or npu_exc is not None:
        if cpu_exc is not None and npu_exc is not None and type(cpu_exc) is type(npu_exc):
            return findings
        which = npu_exc if npu_exc is not None else cpu_exc
        side = "npu" if npu_exc is not None else "cpu"
        findings.append(Finding("backward", f"backward: {side} raised {type(which).__name__}: "
                                            f"{str(which).splitlines()[0][:240]}"))
        return findings
    if op.name in UNINITIALISED_OUTPUT:
        return findings
    diff = compare(npu_grads, cpu_grads)
    if diff is not None:
        findings.append(Finding("backward", f"backward: {diff}",
                                backward_reference_problem(op, sample, seed, cpu_leaves, cpu_grads)))
    return findings


# ---- is the cpu reference sound? -------------------------------------------------

REDUCED_FLOATS = (torch.float16, torch.bfloat16)
# A float16/bfloat16 result this far from the float32 result of the same operator is no
# rounding: relative to the largest float32 value (at least 1). Rounding of reduced floats
# stays orders of magnitude below it.
FAR_FROM_FLOAT32 = 0.05


def forward_reference_problem(op: Any, sample: Any, seed: int, cpu_processed: Any,
                              dtype: torch.dtype | None) -> str | None:
    """Why cpu's forward result on ``sample`` cannot serve as the reference, or None."""
    again, exc = call(op, sample, seed)
    if exc is not None:
        return f"a second cpu call on the same inputs raised {type(exc).__name__}"
    diff = compare(sample.output_process_fn_grad(again), cpu_processed, result_device="cpu")
    if diff is not None:
        return f"two cpu calls on the same inputs differ: {diff}"
    if dtype not in REDUCED_FLOATS:
        return None
    wide_sample = sample.transform(lambda x: x.detach().float() if isinstance(x, torch.Tensor) and x.dtype == dtype else x)
    wide, exc = call(op, wide_sample, seed)
    if exc is not None:
        return None  # no float32 result to judge by
    return _far_from_float32(cpu_processed, wide_sample.output_process_fn_grad(wide), dtype)


def backward_reference_problem(op: Any, sample: Any, seed: int, cpu_leaves: list[torch.Tensor],
                               cpu_grads: list[Any]) -> str | None:
    """Why cpu's gradients on ``sample`` cannot serve as the reference, or None."""
    again, exc = call(op, sample, seed)
    if exc is not None:
        return f"a second cpu call on the same inputs raised {type(exc).__name__}"
    grads, exc = backward(differentiable_outputs(sample.output_process_fn_grad(again)), cpu_leaves, seed + 1)
    if exc is not None:
        return f"a second cpu backward on the same inputs raised {type(exc).__name__}"
    diff = compare(grads, cpu_grads, result_device="cpu")
    return None if diff is None else f"two cpu backward calls on the same inputs differ: {diff}"


def _far_from_float32(narrow_out: Any, wide_out: Any, dtype: torch.dtype) -> str | None:
    from torch.utils._pytree import tree_flatten

    narrow_leaves, _ = tree_flatten(narrow_out)
    wide_leaves, _ = tree_flatten(wide_out)
    if len(narrow_leaves) != len(wide_leaves):
        return None
    largest = torch.finfo(dtype).max
    for i, (narrow, wide) in enumerate(zip(narrow_leaves, wide_leaves)):
        if not (isinstance(narrow, torch.Tensor) and isinstance(wide, torch.Tensor)):
            continue
        if not narrow.is_floating_point() or narrow.shape != wide.shape:
            continue
        n = _dense(narrow.detach()).double()
        w = _dense(wide.detach()).double()
        # Where float32 is finite and representable in `dtype`, a sound result is finite too.
        judged = torch.isfinite(w) & (w.abs() <= largest)
        if not judged.any():
            continue
        if not torch.isfinite(n[judged]).all():
            return f"result {i}: inf/nan where the float32 result is finite"
        scale = max(1.0, w[judged].abs().max().item())
        error = (n - w)[judged].abs().max().item()
        if error > FAR_FROM_FLOAT32 * scale:
            return f"result {i}: {error:.3g} from the float32 result (whose largest value is {scale:.3g})"
    return None


def describe_cpu() -> dict[str, Any]:
    """The host CPU, as a report of unreliable cpu references names it."""
    model: str | None = None
    flags: list[str] = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = (part.strip() for part in line.partition(":"))
                if key == "model name" and model is None:
                    model = value
                elif key in ("flags", "Features") and not flags:  # x86, arm
                    flags = value.split()
    except OSError:
        pass
    model = model or platform.processor() or "unknown"
    vector = sorted(f for f in flags if f.startswith(("avx", "amx", "sse4", "fma", "f16c")))
    return {
        "model": model,
        "vector_flags": vector,
        "flags": flags,
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "onednn_float16": bool(torch.ops.mkldnn._is_mkldnn_fp16_supported()),
    }


def _leaves_of(sample: Any) -> list[torch.Tensor]:
    from torch.utils._pytree import tree_flatten

    return [
        t
        for t in tree_flatten((sample.input, sample.args, sample.kwargs))[0]
        if isinstance(t, torch.Tensor) and t.device.type == "cpu"
    ]


# ---- the child: one operator ---------------------------------------------------


def run_operator(op: Any, dtypes: list[torch.dtype], out: Any) -> None:
    """Runs in the child; writes one JSON line per event to ``out``."""
    torch.set_num_threads(1)
    for dtype in dtypes:
        out.write(json.dumps({"event": "start", "dtype": dtype_name(dtype)}) + "\n")
        out.flush()
        record: dict[str, Any] = {"event": "done", "dtype": dtype_name(dtype), "forward": 0, "backward": 0,
                                  "disagreements": [], "cpu_unreliable": []}
        with_backward = dtype == torch.float32 and op.supports_autograd
        seed = zlib.crc32(f"{op_id(op)}/{dtype}".encode())
        try:
            torch.manual_seed(seed)
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=with_backward))
        except Exception as exc:
            record["sample_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            samples = []
        for index, sample in enumerate(samples):
            try:
                findings = check_sample(op, sample, seed + index, with_backward, dtype)
            except Exception as exc:  # the harness itself failed on this sample
                findings = [Finding("forward", f"harness: {type(exc).__name__}: {str(exc)[:200]}")]
                traceback.print_exc(file=sys.stderr)
            record["forward"] += 1
            if with_backward:
                record["backward"] += 1
            for finding in findings:
                entry = {"sample": index, "kind": finding.kind, "reason": finding.reason}
                if finding.cpu_unreliable is None:
                    record["disagreements"].append(entry)
                else:
                    record["cpu_unreliable"].append({**entry, "cpu_reference": finding.cpu_unreliable})
        out.write(json.dumps(record) + "\n")
        out.flush()


# ---- the parent ------------------------------------------------------------------


def sweep_operator(op: Any, timeout: float) -> list[dict[str, Any]]:
    """Forks children until every dtype of ``op`` has a record (done, crash or timeout)."""
    dtypes = [d for d in DTYPES if d in op.supported_dtypes("cpu")]
    records: list[dict[str, Any]] = []
    while dtypes:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            os.close(read_fd)
            code = 0
            try:
                with os.fdopen(write_fd, "w") as out:
                    run_operator(op, dtypes, out)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        os.close(write_fd)
        started: str | None = None
        finished: set[str] = set()
        buffer = b""
        deadline = time.monotonic() + timeout
        timed_out = False
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([read_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                event = json.loads(line)
                if event["event"] == "start":
                    started = event["dtype"]
                    deadline = time.monotonic() + timeout
                else:
                    finished.add(event["dtype"])
                    records.append({"op": op_id(op), **event})
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
        dtypes = [d for d in dtypes if dtype_name(d) not in finished]
        if not dtypes:
            break
        # The child died (or hung) while running `started`.
        failed = started if started is not None else dtype_name(dtypes[0])
        kind = "timeout" if timed_out else (
            f"signal {signal.Signals(-os.waitstatus_to_exitcode(status)).name}"
            if os.WIFSIGNALED(status) else f"exit {os.waitstatus_to_exitcode(status)}"
        )
        records.append({"op": op_id(op), "event": "crash", "dtype": failed, "kind": kind})
        dtypes = [d for d in dtypes if dtype_name(d) != failed]
    return records


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    groups = {"float32 forward": [], "float32 backward": [], "other dtypes": []}
    totals = {name: [0, 0] for name in groups}  # [samples, disagreeing]
    crashes = [r for r in records if r["event"] == "crash"]
    for r in records:
        if r["event"] != "done":
            continue
        fwd_bad = sum(1 for d in r["disagreements"] if d["kind"] == "forward")
        bwd_bad = sum(1 for d in r["disagreements"] if d["kind"] == "backward")
        if r["dtype"] == "float32":
            totals["float32 forward"][0] += r["forward"]
            totals["float32 forward"][1] += fwd_bad
            totals["float32 backward"][0] += r["backward"]
            totals["float32 backward"][1] += bwd_bad
        else:
            totals["other dtypes"][0] += r["forward"]
            totals["other dtypes"][1] += fwd_bad
    all_samples = sum(t[0] for t in totals.values())
    all_bad = sum(t[1] for t in totals.values())
    unreliable = sum(len(r.get("cpu_unreliable", [])) for r in records if r["event"] == "done")
    return {
        "operators": len({r["op"] for r in records}),
        "op_dtypes": len(records),
        "crashes": len(crashes),
        "groups": {k: {"samples": v[0], "disagree": v[1], "agree_pct": _pct(v)} for k, v in totals.items()},
        "all": {"samples": all_samples, "disagree": all_bad, "agree_pct": _pct([all_samples, all_bad])},
        # Not counted above: the cpu kernel gave no trustworthy result on this CPU.
        "cpu_reference_unreliable": unreliable,
    }


def _pct(total_bad: list[int]) -> float:
    total, bad = total_bad
    return round(100.0 * (total - bad) / total, 3) if total else 100.0


def _print_disagreements(records: list[dict[str, Any]], cpu: dict[str, Any] | None) -> None:
    for r in records:
        if r["event"] == "crash":
            print(f"CRASH {r['op']} {r['dtype']}: {r['kind']}")
        for d in r.get("disagreements", []):
            print(f"{r['op']} {r['dtype']} #{d['sample']} {d['kind']}: {d['reason']}")
    unreliable = [(r, d) for r in records for d in r.get("cpu_unreliable", [])]
    if unreliable:
        where = "" if cpu is None else (
            f" ({cpu['model']}; ATen {cpu['aten_cpu_capability']}, oneDNN float16 {cpu['onednn_float16']}; "
            f"{' '.join(cpu['vector_flags'])})")
        print(f"cpu reference unreliable on this CPU{where}: {len(unreliable)} samples, not counted")
        for r, d in unreliable:
            print(f"  {r['op']} {r['dtype']} #{d['sample']} {d['kind']}: {d['cpu_reference']}; npu vs cpu: {d['reason']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: all of op_db)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per operator and dtype")
    parser.add_argument("--json", help="write every record and the summary to this file")
    parser.add_argument("--list-disagreements", action="store_true")
    parser.add_argument("--summarise", nargs="+", help="summarise --jsonl files instead of running")
    parser.add_argument("--jsonl", help="append each operator's records to this file as it finishes")
    parser.add_argument("--shard", default="0/1", help="K/N: run only the operators whose index is K mod N")
    args = parser.parse_args(argv)

    if args.summarise:
        records = []
        for path in args.summarise:
            with open(path) as f:
                records.extend(json.loads(line) for line in f if line.strip())
        print(json.dumps(summarise(records), indent=2))
        if args.list_disagreements:
            _print_disagreements(records, None)
        return 0

    from torch.testing._internal.common_methods_invocations import op_db

    if torch.npu.is_initialized():
        raise SystemExit("the sweep's parent must not initialise npu (its forked children could not use it)")
    ops = op_db
    if args.ops:
        wanted = [name.strip() for name in args.ops.split(",") if name.strip()]
        by_id = {op_id(op): op for op in op_db}
        missing = [name for name in wanted if name not in by_id]
        if missing:
            raise SystemExit(f"not in op_db: {', '.join(missing)}")
        ops = [by_id[name] for name in wanted]

    shard, shards = (int(v) for v in args.shard.split("/"))
    ops = [op for i, op in enumerate(ops) if i % shards == shard]
    start = time.monotonic()
    records: list[dict[str, Any]] = []
    for number, op in enumerate(ops, 1):
        op_records = sweep_operator(op, args.timeout)
        records.extend(op_records)
        if args.jsonl:
            with open(args.jsonl, "a") as f:
                for r in op_records:
                    f.write(json.dumps(r) + "\n")
        bad = sum(len(r.get("disagreements", [])) for r in op_records)
        unsound = sum(len(r.get("cpu_unreliable", [])) for r in op_records)
        if unsound:
            print(f"[{number}/{len(ops)}] {op_id(op)}: {unsound} samples with an unreliable cpu reference",
                  file=sys.stderr, flush=True)
        crashed = [r["dtype"] for r in op_records if r["event"] == "crash"]
        if bad or crashed:
            print(f"[{number}/{len(ops)}] {op_id(op)}: {bad} disagreeing" + (f", crashed in {crashed}" if crashed else ""),
                  file=sys.stderr, flush=True)
    summary = summarise(records)
    summary["seconds"] = round(time.monotonic() - start, 1)
    summary["cpu"] = describe_cpu()
    printed = {**summary, "cpu": {k: v for k, v in summary["cpu"].items() if k != "flags"}}
    print(json.dumps(printed, indent=2))
    if args.list_disagreements:
        _print_disagreements(records, summary["cpu"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "records": records}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
