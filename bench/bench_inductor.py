"""Inductor on npu: compiled vs eager speed, and first-compile latency npu vs cpu.

All figures come from one run of this script, so the ratios compare like with like:

* steady-state time per call (median of repeated calls), eager npu vs ``torch.compile``
  with ``npu_backend="default"`` (and ``"mlir"`` when that backend is usable), on a
  pointwise-heavy model and on a transformer block;
* first-compile latency (the first call of a freshly compiled model, in a fresh
  interpreter), npu vs cpu, with a cold Inductor cache (empty directory) and then warm
  (same directory again).

Usage: ``python bench/bench_inductor.py [--repeat N] [--json PATH]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from bench_models import make_inductor_bench_case

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)

FIRST_COMPILE_CHILD = textwrap.dedent(
    """
    import sys, time
    import torch
    import torch_npu  # noqa: F401
    from bench_models import make_inductor_bench_case
    model, x = make_inductor_bench_case(sys.argv[1])
    device = sys.argv[2]
    model, x = model.to(device), x.to(device)
    compiled = torch.compile(model, options={"npu_backend": "default"})
    with torch.no_grad():
        start = time.perf_counter()
        compiled(x)
        if device == "npu":
            torch.npu.synchronize()
        print(time.perf_counter() - start)
    """
)


def time_calls(fn, x, repeat: int, sync) -> float:
    """Median seconds per call of ``fn(x)`` after warm-up."""
    import torch

    with torch.no_grad():
        for _ in range(3):
            fn(x)
        sync()
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn(x)
            sync()
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def steady_state(repeat: int) -> dict:
    import torch
    import torch_npu  # noqa: F401

    sync = torch.npu.synchronize
    results: dict = {}
    for name in ("pointwise", "transformer"):
        model, x = make_inductor_bench_case(name)
        model, x = model.to("npu"), x.to("npu")
        row = {"eager_s": time_calls(model, x, repeat, sync)}
        for backend in ("default", "mlir"):
            torch._dynamo.reset()
            try:
                compiled = torch.compile(model, options={"npu_backend": backend})
                with torch.no_grad():
                    torch.testing.assert_close(compiled(x).cpu(), model(x).cpu(), atol=1e-4, rtol=1e-4)
                row[f"{backend}_s"] = time_calls(compiled, x, repeat, sync)
                row[f"eager_over_{backend}"] = row["eager_s"] / row[f"{backend}_s"]
            except Exception as exc:  # mlir is optional; report why it is missing
                row[f"{backend}_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        if "default_s" in row and "mlir_s" in row:
            row["mlir_over_default"] = row["mlir_s"] / row["default_s"]
        results[name] = row
    return results


def first_compile(name: str, device: str, cache_dir: str) -> float:
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": cache_dir,
        # The bench directory makes ``bench_models`` importable in the child.
        "PYTHONPATH": os.pathsep.join(
            p for p in (BENCH_DIR, REPO_ROOT, os.environ.get("PYTHONPATH")) if p
        ),
    }
    out = subprocess.run(
        [sys.executable, "-c", FIRST_COMPILE_CHILD, name, device],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def first_compile_latency() -> dict:
    results: dict = {}
    for name in ("pointwise", "transformer"):
        row: dict = {}
        for device in ("cpu", "npu"):
            # One cache directory per device, so the npu cold run cannot reuse cpu kernels.
            cache_dir = tempfile.mkdtemp(prefix=f"bench_inductor_{device}_")
            row[f"{device}_cold_s"] = first_compile(name, device, cache_dir)
            row[f"{device}_warm_s"] = first_compile(name, device, cache_dir)
        row["npu_over_cpu_cold"] = row["npu_cold_s"] / row["cpu_cold_s"]
        row["npu_over_cpu_warm"] = row["npu_warm_s"] / row["cpu_warm_s"]
        results[name] = row
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bench_inductor_"))
    results = {
        "steady_state": steady_state(args.repeat),
        "first_compile": first_compile_latency(),
    }
    for section, rows in results.items():
        print(f"== {section}")
        for name, row in rows.items():
            cells = ", ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()
            )
            print(f"  {name}: {cells}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
