"""Import cost of torch_npu against plain torch.

Runs ``import torch`` and ``import torch_npu`` in fresh interpreters, alternating, with
TORCH_DEVICE_BACKEND_AUTOLOAD=0 so the torch baseline does not load torch_npu itself.
Reports the median wall time of the import statement and of the whole process, their
ratio, and the peak RSS difference, against the budgets (import time <= 1.10x torch,
peak RSS <= +25 MB). A third interpreter, alternating with the two, imports torch and then
torch_npu, timing each: (torch + torch_npu after it) ÷ torch within one process is the same
ratio without the load changes between processes, which on a shared machine move a
2-second import by more than torch_npu's whole cost.

    python bench/bench_import.py [--runs N] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TIME_BUDGET_RATIO = 1.10
RSS_BUDGET_MB = 25.0

# The child reports the import statement's own time and its peak RSS (ru_maxrss is KiB
# on Linux).
CHILD = """
import time, resource, json
t0 = time.perf_counter()
import {module}
t1 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}))
"""
SPLIT_CHILD = """
import time, json
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import torch_npu
t2 = time.perf_counter()
print(json.dumps({"torch_s": t1 - t0, "torch_npu_after_torch_s": t2 - t1}))
"""


def measure(module: str, write_bytecode: bool = False) -> dict[str, float]:
    """One fresh interpreter importing `module` ("split": torch, then torch_npu, each timed)."""
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    if write_bytecode:
        # An installed package has its bytecode compiled; with PYTHONDONTWRITEBYTECODE set a
        # source checkout would recompile every changed module on each run and the ratio
        # would measure the compiler, not the import.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", SPLIT_CHILD if module == "split" else CHILD.format(module=module)], env=env,
        capture_output=True, text=True, check=True
    ).stdout
    wall = time.perf_counter() - start
    result = json.loads(out.strip().splitlines()[-1])
    result["process_s"] = wall
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="runs per module (at least 5)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args()
    runs = max(args.runs, 5)

    # One untimed run each warms the file cache and writes missing bytecode.
    measure("torch", write_bytecode=True)
    measure("torch_npu", write_bytecode=True)
    samples: dict[str, list[dict[str, float]]] = {"torch": [], "torch_npu": [], "split": []}
    for _ in range(runs):
        for module in ("torch", "torch_npu", "split"):
            samples[module].append(measure(module))

    def median(module: str, key: str) -> float:
        return statistics.median(s[key] for s in samples[module])

    summary = {
        "runs": runs,
        "torch_import_s": median("torch", "import_s"),
        "torch_npu_import_s": median("torch_npu", "import_s"),
        "torch_process_s": median("torch", "process_s"),
        "torch_npu_process_s": median("torch_npu", "process_s"),
        "torch_peak_rss_mb": median("torch", "maxrss_kb") / 1024,
        "torch_npu_peak_rss_mb": median("torch_npu", "maxrss_kb") / 1024,
    }
    summary["import_ratio"] = summary["torch_npu_import_s"] / summary["torch_import_s"]
    summary["torch_npu_after_torch_s"] = median("split", "torch_npu_after_torch_s")
    summary["in_process_ratio"] = statistics.median(
        (s["torch_s"] + s["torch_npu_after_torch_s"]) / s["torch_s"] for s in samples["split"])
    summary["process_ratio"] = summary["torch_npu_process_s"] / summary["torch_process_s"]
    summary["rss_delta_mb"] = summary["torch_npu_peak_rss_mb"] - summary["torch_peak_rss_mb"]
    summary["time_ok"] = summary["import_ratio"] <= TIME_BUDGET_RATIO
    summary["rss_ok"] = summary["rss_delta_mb"] <= RSS_BUDGET_MB

    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"import time, median of {runs} alternating runs (TORCH_DEVICE_BACKEND_AUTOLOAD=0)")
        print(f"  import torch       {summary['torch_import_s'] * 1e3:8.1f} ms   (process {summary['torch_process_s'] * 1e3:7.1f} ms)")
        print(f"  import torch_npu   {summary['torch_npu_import_s'] * 1e3:8.1f} ms   (process {summary['torch_npu_process_s'] * 1e3:7.1f} ms)")
        print(
            f"  ratio              {summary['import_ratio']:8.3f} x   (process {summary['process_ratio']:.3f} x)"
            f"   budget <= {TIME_BUDGET_RATIO:.2f} x  {'OK' if summary['time_ok'] else 'OVER'}"
        )
        print(f"  in one process     {summary['in_process_ratio']:8.3f} x   (import torch_npu after import torch"
              f" {summary['torch_npu_after_torch_s'] * 1e3:.1f} ms)")
        print(
            f"peak RSS             torch {summary['torch_peak_rss_mb']:.1f} MB, torch_npu {summary['torch_npu_peak_rss_mb']:.1f} MB,"
            f" delta {summary['rss_delta_mb']:+.1f} MB   budget <= {RSS_BUDGET_MB:.0f} MB  {'OK' if summary['rss_ok'] else 'OVER'}"
        )
    return 0 if summary["time_ok"] and summary["rss_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
