"""Compiled fused npu_* operators against their eager npu implementation, side by side.

The eager implementation of each fused operator is its composite of ATen ops run by the npu
runtime; under Inductor the operator decomposes into the same formula and fuses. For
``npu_rms_norm``, ``npu_swiglu`` and ``npu_rotary_mul`` on a 4096x4096 float32 input this
checks that the compiled function is exactly one kernel and times compiled against eager,
alternating, reporting the median of the ratios of neighbouring samples (budget <= 0.5)
with their quartiles. ``npu_rms_norm`` is timed twice:
as LLM code calls it (``[0]``, the normalised output) and returning ``rstd`` as well.
The machine's load average is printed with the figures.

All three are memory-bound on a host CPU, so the ratio is bounded below by the bytes moved:
compiled ``npu_swiglu`` reads the input once and writes the output once (with the write's
cache-line fill: 128 MiB here), where the eager ``silu(a) * b`` also writes and re-reads
``silu(a)`` (224 MiB): 0.57 by bytes alone, so swiglu sits near the 0.5 budget, and only
non-temporal stores (which Inductor's C++ backend does not emit) would move it well below.

    python bench/bench_fused_ops.py [--samples N] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Callable

import torch
from torch._inductor.utils import run_and_get_code

import torch_npu

BUDGET = 0.5
LAUNCH = "torch.npu._launch_host_kernel("
N = 4096


def _cases() -> dict[str, tuple[Callable, tuple]]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(N, N, generator=gen).npu()
    gamma = torch.randn(N, generator=gen).npu()
    # BSND with B=1, S=4096, N=32, D=128: 4096x4096 elements; cos/sin broadcast over heads.
    q = torch.randn(1, N, 32, 128, generator=gen).npu()
    cos = torch.randn(1, N, 1, 128, generator=gen).npu()
    sin = torch.randn(1, N, 1, 128, generator=gen).npu()
    return {
        "npu_rms_norm[0]": (lambda x, g: torch_npu.npu_rms_norm(x, g)[0], (x, gamma)),
        "npu_rms_norm (y, rstd)": (lambda x, g: torch_npu.npu_rms_norm(x, g), (x, gamma)),
        "npu_swiglu": (lambda x: torch_npu.npu_swiglu(x), (x,)),
        "npu_rotary_mul": (lambda q, c, s: torch_npu.npu_rotary_mul(q, c, s), (q, cos, sin)),
    }


def _time(fn: Callable, args: tuple, calls: int = 3) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    torch.npu.synchronize()
    return (time.perf_counter() - start) / calls


def run(samples: int) -> dict[str, dict[str, float]]:
    results = {}
    for name, (fn, args) in _cases().items():
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="inductor", fullgraph=True)
        _, code = run_and_get_code(compiled, *args)
        kernels = sum(c.count(LAUNCH) for c in code)
        assert kernels == 1, f"{name}: compiled to {kernels} kernels, expected 1"
        eager_times, compiled_times = [], []
        _time(fn, args, 1)  # warm up the allocator's cache
        for _ in range(samples):
            eager_times.append(_time(fn, args))
            compiled_times.append(_time(compiled, args))
        eager, comp = statistics.median(eager_times), statistics.median(compiled_times)
        # Each compiled sample against the eager sample timed just before it: the load of
        # a shared machine drifts between samples, much less within one pair.
        ratios = sorted(c / e for c, e in zip(compiled_times, eager_times))
        results[name] = {
            "kernels": kernels,
            "eager_ms": eager * 1e3,
            "compiled_ms": comp * 1e3,
            "ratio": statistics.median(ratios),
            "ratio_quartiles": (ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=11)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    load = os.getloadavg()
    results = run(options.samples)
    if options.json:
        print(json.dumps({"load": load, "results": results}, indent=2))
        return
    print(f"compiled vs eager npu implementation, {N}x{N} float32, median of {options.samples}, "
          f"{torch.get_num_threads()} threads, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    for name, r in results.items():
        verdict = "OK" if r["ratio"] <= BUDGET else "over budget"
        print(f"  {name:24s} {r['kernels']} kernel  eager {r['eager_ms']:7.1f} ms  compiled "
              f"{r['compiled_ms']:7.1f} ms  ratio {r['ratio']:.2f} [{r['ratio_quartiles'][0]:.2f}, "
              f"{r['ratio_quartiles'][1]:.2f}]  (budget <= {BUDGET})  {verdict}")


if __name__ == "__main__":
    main()
