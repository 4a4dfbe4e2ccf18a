"""The bench commands the figures in docs/figures.md come from still run: each is run as
documented, with the fewest samples and calls, and must finish and print its ratio lines.
Nothing here judges the timings (a shared machine makes them noise at these sizes)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH_DIR = os.path.join(REPO_ROOT, "bench")
RATIO = r"[0-9]+\.[0-9]+x"


def _run_bench(script: str, *args: str) -> str:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p),
        "TORCH_NPU_MEMORY_CAPACITY_MB": "256",
    }
    out = subprocess.run([sys.executable, os.path.join(BENCH_DIR, script), *args], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    # bench_eager exits 1 when a timing is over its budget: only a crash is a failure here.
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode in (0, 1), out.stderr
    return out.stdout


def test_bench_eager_prints_each_case_ratio():
    stdout = _run_bench("bench_eager.py", "--samples", "1", "--calls", "1")
    for case in ("add_1_element", "mul_1_element", "add_inplace_1_element", "mul_number_1_element", "relu_1_element",
                 "matmul_512x512", "pointwise_add_1M"):
        assert re.search(rf"^\s+{case}\s.*{RATIO}", stdout, re.M), stdout


def test_bench_inductor_devices_prints_step_ratio_and_launch_cost():
    stdout = _run_bench("bench_inductor_devices.py", "--cases", "pointwise_256k", "--blocks", "1", "--calls", "1")
    assert re.search(rf"^\s+pointwise_256k\s.*ratio {RATIO}", stdout, re.M), stdout
    assert re.search(r"^\s+launch: \d+ kernels a call, .* per launch -?\d+ns; the entry point alone -?\d+ns", stdout,
                     re.M), stdout
