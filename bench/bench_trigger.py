"""Cost of torch_npu's compile trigger, measured in one run.

1. Finder cost on 1,000 unrelated imports: the trigger's post-import finder and the
   npugraph_ex alias finder sit in front of ``sys.meta_path`` and are asked about every
   import. Measured as the sum of their ``find_spec`` answers for 1,000 module names that
   are neither watched nor aliased: that is all they add to an import (end-to-end import
   timings on this 2-core machine vary by tens of ms and would hide it). Target: < 1 ms.
2. Time from ``import torch`` to the first compiled call with ``backend="eager"`` on npu,
   against the same on cpu without torch_npu (``TORCH_DEVICE_BACKEND_AUTOLOAD=0``):
   medians of alternating fresh processes. Target: ratio <= 1.2.

Run: ``python bench/bench_trigger.py [--runs N]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FINDER_COST = r"""
import importlib, os, sys, tempfile, time
import torch_npu
from torch_npu._startup import compile_trigger as _compile_trigger, npugraph_ex_finder as _npugraph_ex_finder

finders = [f for f in sys.meta_path if f in (_compile_trigger._finder, _npugraph_ex_finder._finder)]
assert len(finders) == 2, f"expected both finders in sys.meta_path, got {finders}"

names = [f"bench_unrelated_{i}" for i in range(1000)]
start = time.perf_counter()
for name in names:
    for finder in finders:
        finder.find_spec(name, None)
direct_ms = (time.perf_counter() - start) * 1e3

print(f"{direct_ms:.4f}")
"""

FIRST_COMPILE = r"""
import time
start = time.perf_counter()
import torch
{import_npu}
def fn(x):
    return (x.sin() * 2 + 1).relu().sum()
x = torch.randn(64, 64, device="{device}")
out = torch.compile(fn, backend="eager")(x)
out.cpu()
print(time.perf_counter() - start)
"""


def _run(code: str, env: dict[str, str]) -> str:
    full_env = dict(os.environ)
    full_env.update(env)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=full_env, capture_output=True, text=True
    )
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    return result.stdout.strip()


def finder_cost(repeats: int = 5) -> None:
    costs = sorted(float(_run(FINDER_COST, {})) for _ in range(repeats))
    median = costs[len(costs) // 2]
    print(
        f"finder cost on 1000 unrelated imports: {median:.3f} ms "
        f"({median:.3f} us per import; median of {repeats} processes; target < 1 ms)"
    )


def first_compile(runs: int) -> None:
    npu_code = FIRST_COMPILE.format(import_npu="import torch_npu", device="npu")
    cpu_code = FIRST_COMPILE.format(import_npu="", device="cpu")
    npu_times, cpu_times = [], []
    for _ in range(runs):
        npu_times.append(float(_run(npu_code, {})))
        cpu_times.append(float(_run(cpu_code, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})))
    npu, cpu = statistics.median(npu_times), statistics.median(cpu_times)
    print(
        f"import torch -> first eager-backend compiled call: npu {npu:.3f} s, cpu {cpu:.3f} s, "
        f"ratio {npu / cpu:.3f} (target <= 1.2; median of {runs} alternating runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    finder_cost()
    first_compile(args.runs)


if __name__ == "__main__":
    main()
