"""Inductor on npu against Inductor on cpu, and the cost of one npu kernel launch.

npu kernels are the cpu kernels Inductor generates, run on the same host memory, so a
compiled npu step should cost what the compiled cpu step costs. What npu adds is the
runtime around the kernels: the launch entry point every kernel goes through
(``torch.npu._launch_host_kernel``, so that graph capture can record it), the device guard
around the graph body, npu buffer allocation, and extern kernels (matmul, convolution)
dispatched through the npu operator path. Both figures come from one process:

* ``steps``: time per compiled call, npu ÷ cpu, for a small MLP, a small CNN, one
  transformer block and a 256K-element pointwise chain (inference). The two devices are
  timed in alternating blocks of calls; the figure is the median over blocks, and the ratio
  of the fastest blocks is printed beside it (on a loaded machine, the less disturbed one);
* ``launch``: the same npu graph compiled twice, its kernels launched through the runtime
  and called directly (``launch_through_runtime`` off, as Inductor calls cpu kernels);
  the difference per call divided by the number of kernels is the cost of one launch.

``--clock thread`` times the calling thread's CPU time instead of wall time: on a shared
machine, wall time counts whatever the scheduler gives other processes while a block runs
(one block can take twice the next), thread time does not. It is a faithful measure here
because a compiled inference call runs all its work, npu kernels included, on the calling
thread (the simulated device runs each kernel on the host, in the launch).

    python bench/bench_inductor_devices.py [--blocks N] [--calls N] [--only steps,launch] [--cases mlp,...]
        [--clock wall|thread] [--json]
"""
from __future__ import annotations

import argparse
import json
import operator
import os
import statistics
import sys
import tempfile
import time
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_npu  # noqa: F401  (registers the npu device and the compile trigger)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_models import MLP, TransformerBlock  # noqa: E402

LAUNCH = "npu_launch_host_kernel("


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.conv2(x))
        return self.fc(x.mean((2, 3)))


class PointwiseChain(nn.Module):
    def forward(self, x):
        y = torch.sin(x) * 1.5 + 0.25
        y = torch.tanh(y) * torch.sigmoid(x)
        return torch.where(y > 0.1, y.exp(), y * 0.5)


def _kernel_chain(x, weight):
    # Inductor's C++ backend fuses whatever it can into one kernel; an extern matmul
    # between pointwise steps ends a kernel, so each step is one small kernel of its own.
    for _ in range(8):
        x = torch.sin(x @ weight) + 1
    return x


# Two functions (two code objects, so two Dynamo cache entries) compiled from one body:
# one with kernels launched through the runtime, one with them called directly.
def kernels_through_runtime(x, weight):
    return _kernel_chain(x, weight)


def kernels_called_directly(x, weight):
    return _kernel_chain(x, weight)


def make_case(name: str):
    """The model (eval mode, seed 0) and cpu input timed as ``name``."""
    torch.manual_seed(0)
    if name == "mlp":
        return MLP(dim=64).eval(), torch.randn(32, 64)
    if name == "cnn":
        return SmallCNN().eval(), torch.randn(4, 3, 32, 32)
    if name == "transformer":
        return TransformerBlock(dim=64, heads=4).eval(), torch.randn(2, 32, 64)
    if name == "pointwise_256k":
        return PointwiseChain(), torch.randn(1 << 18)
    raise ValueError(f"unknown case {name!r}")


STEP_CASES = ("mlp", "cnn", "transformer", "pointwise_256k")
CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}
_clock = CLOCKS["wall"]


def _time_block(fn: Callable[[], object], calls: int, sync: Callable[[], None]) -> float:
    start = _clock()
    for _ in range(calls):
        fn()
    sync()
    return (_clock() - start) / calls


def alternating_blocks(fns: dict, calls: int, blocks: int) -> dict:
    """Seconds per call of each ``(fn, sync)`` in ``fns`` in every block, blocks alternating in order."""
    for fn, sync in fns.values():  # warm-up: caches, thread pools, lazy initialisation
        _time_block(fn, calls, sync)
    names = list(fns)
    samples: dict = {name: [] for name in names}
    for i in range(blocks):
        for name in names if i % 2 == 0 else reversed(names):
            fn, sync = fns[name]
            samples[name].append(_time_block(fn, calls, sync))
    return samples


def alternating_medians(fns: dict, calls: int, blocks: int) -> dict:
    """Median seconds per call of each ``(fn, sync)`` in ``fns``, blocks alternating in order."""
    return {name: statistics.median(s) for name, s in alternating_blocks(fns, calls, blocks).items()}


def _compiled_call(model: nn.Module, x: torch.Tensor) -> Callable[[], object]:
    compiled = torch.compile(model, options={"npu_backend": "default"})
    with torch.no_grad():
        compiled(x)  # compile now, outside the timing

    def call():
        with torch.no_grad():
            return compiled(x)

    return call


def steps(calls: int, blocks: int, cases: tuple[str, ...] = STEP_CASES) -> dict:
    rows = {}
    for name in cases:
        torch._dynamo.reset()
        model, x = make_case(name)
        cpu_call = _compiled_call(model, x)
        npu_call = _compiled_call(make_case(name)[0].to("npu"), x.to("npu"))
        with torch.no_grad():
            torch.testing.assert_close(npu_call().cpu(), cpu_call(), atol=1e-5, rtol=1e-5)
        samples = alternating_blocks({"cpu": (cpu_call, lambda: None), "npu": (npu_call, torch.npu.synchronize)},
                                     calls, blocks)
        t = {side: statistics.median(s) for side, s in samples.items()}
        # Another process can only add time to a block (its run, or the caches it evicts): on a
        # loaded machine the fastest blocks are the ones closest to the call's own cost.
        fastest = {side: min(s) for side, s in samples.items()}
        rows[name] = {"cpu_us": t["cpu"] * 1e6, "npu_us": t["npu"] * 1e6, "npu_over_cpu": t["npu"] / t["cpu"],
                      "fastest_npu_over_cpu": fastest["npu"] / fastest["cpu"]}
    return rows


def launch(calls: int, blocks: int) -> dict:
    from torch._inductor.utils import run_and_get_code

    from torch_npu.compiler.inductor import config as npu_config

    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 4, generator=gen).to("npu")
    weight = (torch.randn(4, 4, generator=gen) / 4).to("npu")
    through_runtime = torch.compile(kernels_through_runtime, options={"npu_backend": "default"})
    _, codes = run_and_get_code(through_runtime, x, weight)
    kernels = sum(code.count(LAUNCH) for code in codes)
    with npu_config.patch(launch_through_runtime=False):
        direct = torch.compile(kernels_called_directly, options={"npu_backend": "default"})
        _, direct_codes = run_and_get_code(direct, x, weight)
    assert kernels > 0 and direct_codes and not any(LAUNCH in code for code in direct_codes)
    torch.testing.assert_close(through_runtime(x, weight), direct(x, weight))
    sync = torch.npu.synchronize
    t = alternating_medians({"direct": (lambda: direct(x, weight), sync),
                             "runtime": (lambda: through_runtime(x, weight), sync)}, calls, blocks)
    # The entry point alone, around a C function that does nothing with its arguments
    # (the generated code passes the kernel's name and written positions, as here).
    launch_entry = torch.npu._launch_host_kernel
    calls_per_sample = 1000

    def entry_calls():
        for _ in range(calls_per_sample):
            launch_entry(operator.is_, x, weight, name="cpp_fused_add_0", writes=(1,))

    def direct_calls():
        for _ in range(calls_per_sample):
            operator.is_(x, weight)

    e = alternating_medians({"direct": (direct_calls, lambda: None), "entry": (entry_calls, lambda: None)},
                            max(1, calls // 10), blocks)
    return {
        "entry_point_ns": (e["entry"] - e["direct"]) / calls_per_sample * 1e9,
        "kernels_per_call": kernels,
        "direct_call_us": t["direct"] * 1e6,
        "through_runtime_call_us": t["runtime"] * 1e6,
        "per_launch_ns": (t["runtime"] - t["direct"]) / kernels * 1e9,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=21, help="timed blocks per side")
    parser.add_argument("--calls", type=int, default=200, help="calls per timed block")
    parser.add_argument("--only", default="steps,launch", help="comma-separated sections: steps, launch")
    parser.add_argument("--cases", default=",".join(STEP_CASES), help="comma-separated models of the steps section")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1: see docs/figures.md)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time, or the calling thread's CPU time (see above)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    global _clock
    _clock = CLOCKS[args.clock]
    torch.set_num_threads(args.threads)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bench_inductor_devices_"))

    sections = [s for s in args.only.split(",") if s]
    unknown = set(sections) - {"steps", "launch"}
    if unknown:
        parser.error(f"unknown section(s) {sorted(unknown)}; choose from steps, launch")
    cases = tuple(c for c in args.cases.split(",") if c)
    if set(cases) - set(STEP_CASES):
        parser.error(f"unknown case(s) {sorted(set(cases) - set(STEP_CASES))}; choose from {', '.join(STEP_CASES)}")
    results = {}
    if "steps" in sections:
        results["steps"] = steps(args.calls, args.blocks, cases)
    if "launch" in sections:
        results["launch"] = launch(args.calls, args.blocks)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"Inductor npu vs cpu, median of {args.blocks} alternating blocks of {args.calls} calls, "
          f"{torch.get_num_threads()} thread(s), {args.clock} clock, load {os.getloadavg()[0]:.1f}")
    for name, row in results.get("steps", {}).items():
        print(f"  {name:<16}cpu {row['cpu_us']:9.2f}us  npu {row['npu_us']:9.2f}us  "
              f"ratio {row['npu_over_cpu']:.3f}x (fastest blocks {row['fastest_npu_over_cpu']:.3f}x)")
    if "launch" in results:
        r = results["launch"]
        print(f"  launch: {r['kernels_per_call']} kernels a call, direct {r['direct_call_us']:.2f}us, "
              f"through the runtime {r['through_runtime_call_us']:.2f}us, "
              f"per launch {r['per_launch_ns']:.0f}ns; the entry point alone {r['entry_point_ns']:.0f}ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
