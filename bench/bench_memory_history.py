"""Cost of recording memory history (``torch.npu.memory._record_memory_history``) on eager npu code.

Each case times blocks of calls with recording off and on (``enabled="all"``,
``context="all"``, ``stacks="python"``: a Python stack for every allocation and free),
alternating the two, and reports the median of the ratios of back-to-back blocks. Budget: the 1M-element add (one 4 MiB output
allocated and freed per call) <= 1.5x with recording on. The 1-element add is reported
for information: it is all allocator and dispatch, so the stack capture dominates it.

    python bench/bench_memory_history.py [--samples N] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Callable

import torch

import torch_npu  # noqa: F401  (registers the npu device)


def _case_add(n: int) -> Callable[[], object]:
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, generator=gen).npu()
    b = torch.randn(n, generator=gen).npu()
    return lambda: a + b


# name -> (builder, calls per timed block, budget ratio or None)
CASES = {
    "pointwise_add_1M": (lambda: _case_add(1 << 20), 50, 1.5),
    "add_1_element": (lambda: _case_add(1), 2000, None),
}


def _set_recording(on: bool) -> None:
    if on:
        torch.npu.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=100_000)
    else:
        torch.npu.memory._record_memory_history(enabled=None)


def _time_block(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.npu.synchronize()
    return (time.perf_counter() - start) / calls


def run_case(name: str, samples: int) -> dict[str, float]:
    build, calls, budget = CASES[name]
    fn = build()
    for on in (False, True):  # warm-up
        _set_recording(on)
        _time_block(fn, calls)
    times: dict[bool, list[float]] = {False: [], True: []}
    pair_ratios = []
    for i in range(samples):
        for on in (False, True) if i % 2 == 0 else (True, False):
            _set_recording(on)
            times[on].append(_time_block(fn, calls))
        # Blocks measured back to back: a change of load between pairs cancels out.
        pair_ratios.append(times[True][-1] / times[False][-1])
    _set_recording(False)
    off = statistics.median(times[False])
    on = statistics.median(times[True])
    ratio = statistics.median(pair_ratios)
    return {"off_us": off * 1e6, "on_us": on * 1e6, "ratio": ratio,
            "ratio_quartiles": statistics.quantiles(pair_ratios, n=4)[::2], "budget": budget,
            "ok": budget is None or ratio <= budget}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=21, help="timed blocks per setting and case")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    results = {name: run_case(name, args.samples) for name in CASES}
    if args.json:
        print(json.dumps({"threads": torch.get_num_threads(), "cases": results}, indent=2))
    else:
        print(f"memory history off vs on, median of {args.samples} alternating blocks, {torch.get_num_threads()} threads")
        print(f"  {'case':<20}{'off':>12}{'on':>12}{'ratio':>9}{'budget':>9}")
        for name, r in results.items():
            budget = f"{r['budget']:.2f}x" if r["budget"] else "-"
            verdict = "" if r["budget"] is None else ("OK" if r["ok"] else "OVER")
            print(f"  {name:<20}{r['off_us']:>10.2f}us{r['on_us']:>10.2f}us{r['ratio']:>8.2f}x{budget:>9}  {verdict}")
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
