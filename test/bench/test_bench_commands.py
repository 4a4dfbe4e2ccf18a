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


def test_bench_inductor_devices_times_the_thread_clock():
    stdout = _run_bench("bench_inductor_devices.py", "--only", "steps", "--cases", "pointwise_256k", "--blocks", "1",
                        "--calls", "1", "--clock", "thread")
    assert "thread clock" in stdout, stdout
    assert re.search(rf"^\s+pointwise_256k\s.*ratio {RATIO}", stdout, re.M), stdout


def test_bench_import_prints_time_ratio_and_rss_delta():
    stdout = _run_bench("bench_import.py", "--runs", "5")
    assert re.search(rf"^\s+ratio\s+{RATIO}", stdout.replace(" x", "x"), re.M), stdout
    assert re.search(rf"^\s+in one process\s+{RATIO}\s+\(import torch_npu after import torch [0-9.]+ ms\)",
                     stdout.replace(" x", "x"), re.M), stdout
    assert re.search(r"^peak RSS .* delta [+-][0-9.]+ MB", stdout, re.M), stdout


def test_bench_real_models_eager_prints_inference_fwd_bwd_and_training_ratios():
    stdout = _run_bench("bench_real_models.py", "--only", "eager", "--repeat", "1")
    for model in ("gpt2", "bert", "llama"):
        line = re.search(rf"^\s+{model}: (.*)$", stdout, re.M)
        assert line, stdout
        for figure in ("inference_npu_over_cpu", "fwd_bwd_npu_over_cpu", "fwd_bwd_calling_thread_npu_over_cpu",
                       "training_npu_over_cpu"):
            assert re.search(rf"{figure}=[0-9.e+-]+", line.group(1)), line.group(1)


def test_bench_reduce_overhead_prints_training_speedup_and_replay_memory():
    stdout = _run_bench("bench_reduce_overhead.py", "--only", "linear_ln_gelu", "--blocks", "1", "--block-steps", "1")
    for kind in ("infer", "train"):
        assert re.search(rf"^linear_ln_gelu_{kind}_inductor_over_reduce_overhead\s+[0-9.]+$", stdout, re.M), stdout
        # nothing recompiled, re-recorded or run eagerly while timed: the ratio times replays
        assert re.search(rf"^linear_ln_gelu_{kind}_recompiles_records_eager_runs_while_timed\s+0, 0, 0$", stdout,
                         re.M), stdout
    before = re.search(r"^memory_allocated_before\s+(\d+)$", stdout, re.M)
    after = re.search(r"^memory_allocated_after_1000_replays\s+(\d+)$", stdout, re.M)
    assert before and after and before.group(1) == after.group(1), stdout


def test_bench_real_models_first_compile_train_prints_wall_and_cpu_time_ratios():
    # The figure's command compiles with Inductor for minutes per pair; aot_eager runs the same
    # children (cold cache, one compile thread, forward + loss + backward) in seconds.
    stdout = _run_bench("bench_real_models.py", "--only", "first_compile_train", "--compiles", "1",
                        "--first-compile-backend", "aot_eager")
    line = re.search(r"^\s+gpt2: (.*)$", stdout, re.M)
    assert line, stdout
    for figure in ("npu_over_cpu_cold", "npu_over_cpu_cold_cpu_time", "cpu_cold_cpu_s", "npu_cold_cpu_s"):
        value = re.search(rf"\b{figure}=([0-9.e+-]+)", line.group(1))
        assert value and float(value.group(1)) > 0, line.group(1)
