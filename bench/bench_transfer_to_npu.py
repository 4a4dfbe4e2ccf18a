"""Cost of transfer_to_npu on eager calls that need no rewriting, side by side in one process.

After ``import torch_npu.contrib.transfer_to_npu`` (tensors made with ``device="cuda"``, as a
CUDA script makes them) this times blocks of a 1-element npu add and of a small MLP forward
(8x64 -> 128 -> GELU -> 10, no grad) with the group applied and with it reverted
(``torch_npu._patches.transfer_to_npu.revert()``: every patch and registration undone, as
without the import), alternating which goes first and discarding the first blocks after each
switch (a switch changes torch.Tensor and the dispatcher's tables, emptying caches), and reports the median of the ratios of
neighbouring blocks (robust to the load drifting during the run; budget <= 1.3 for the add).
Blocks are short (100 adds, 10 forwards): on a loaded machine most of them run without being
preempted.

For comparison it also times the same blocks with transfer_to_npu's TorchFunctionMode on the
stack, as every eager call had it before the dispatcher took over eager rewriting (and as
calls of compiled functions still do), and with a minimal Python TorchFunctionMode
(``return func(*args, **kwargs)``). One intra-op thread. The load average is printed with the
figures.

With ``--compiled`` it also times calls of the MLP compiled by Inductor with the group applied
(each call enters the mode, which the compiled code's own torch calls then pass through)
against the same function compiled with the group reverted.

    python bench/bench_transfer_to_npu.py [--samples N] [--calls N] [--compiled] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

import torch_npu.contrib.transfer_to_npu  # noqa: F401  (applies the group)
from torch.overrides import TorchFunctionMode
from torch_npu._patches import transfer_to_npu as group
from torch_npu._patches.transfer_to_npu import device_mode

BUDGET = 1.3


class MinimalPythonMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class Workload:
    def __init__(self, calls: int) -> None:
        torch.manual_seed(0)
        self.a = torch.ones(1, device="cuda")  # npu, through the group
        self.b = torch.ones(1, device="cuda")
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10)
        ).cuda()
        self.x = torch.randn(8, 64, device="cuda")
        assert self.a.device.type == "npu" and next(self.mlp.parameters()).device.type == "npu"
        self.calls = calls

    def add(self) -> float:
        a, b = self.a, self.b
        start = time.perf_counter()
        for _ in range(self.calls):
            a + b
        return (time.perf_counter() - start) / self.calls

    def forward(self) -> float:
        mlp, x, n = self.mlp, self.x, max(1, self.calls // 10)
        with torch.no_grad():
            start = time.perf_counter()
            for _ in range(n):
                mlp(x)
            return (time.perf_counter() - start) / n

    def both(self) -> tuple[float, float]:
        return self.add(), self.forward()


def run(samples: int, calls: int) -> dict[str, float]:
    torch.set_num_threads(1)
    work = Workload(calls)
    mode, python_mode = device_mode._mode, MinimalPythonMode()
    work.both()  # warm up
    rows = []
    for i in range(samples):
        timings = {}
        for state in (("with", "without") if i % 2 == 0 else ("without", "with")):
            if state == "with":
                group.apply()
            else:
                group.revert()
            work.both()  # after a switch, the first calls refill the caches the switch emptied
            timings[state] = work.both()
        group.apply()
        for name, entered in (("mode", mode), ("python_mode", python_mode)):
            with entered:
                work.both()
                timings[name] = work.both()
        rows.append(timings)

    def ratio(state: str, which: int) -> float:
        return statistics.median(row[state][which] / row["without"][which] for row in rows)

    def median(state: str, which: int) -> float:
        return statistics.median(row[state][which] for row in rows)

    return {
        "add_us": median("without", 0) * 1e6,
        "add_transfer_us": median("with", 0) * 1e6,
        "mlp_us": median("without", 1) * 1e6,
        "mlp_transfer_us": median("with", 1) * 1e6,
        "ratio": ratio("with", 0),
        "mlp_ratio": ratio("with", 1),
        "mode_ratio": ratio("mode", 0),
        "mlp_mode_ratio": ratio("mode", 1),
        "python_mode_ratio": ratio("python_mode", 0),
        "mlp_python_mode_ratio": ratio("python_mode", 1),
    }


def run_compiled(samples: int, calls: int) -> dict[str, float]:
    torch.set_num_threads(1)
    work = Workload(calls)
    mlp, x, n = work.mlp, work.x, max(1, calls // 10)
    with_group = torch.compile(lambda inp: mlp(inp))
    group.revert()
    without_group = torch.compile(lambda inp: mlp(inp))
    group.apply()

    def block(compiled) -> float:
        start = time.perf_counter()
        for _ in range(n):
            compiled(x)
        return (time.perf_counter() - start) / n

    with torch.no_grad():
        block(with_group), block(without_group)  # compile, warm up
        rows = []
        for i in range(samples):
            order = (with_group, without_group) if i % 2 == 0 else (without_group, with_group)
            got = {compiled: block(compiled) for compiled in order}
            rows.append((got[with_group], got[without_group]))
    return {
        "compiled_mlp_us": statistics.median(b for _, b in rows) * 1e6,
        "compiled_mlp_transfer_us": statistics.median(a for a, _ in rows) * 1e6,
        "compiled_mlp_ratio": statistics.median(a / b for a, b in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=301)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--compiled", action="store_true")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    load = os.getloadavg()
    result = run(options.samples, options.calls)
    if options.compiled:
        result.update(run_compiled(options.samples, options.calls))
    if options.json:
        print(json.dumps({"load": load, **result}, indent=2))
        return
    verdict = "OK" if result["ratio"] <= BUDGET else "over budget"
    print(f"median of {options.samples} rounds (blocks of {options.calls} adds, "
          f"{max(1, options.calls // 10)} MLP forwards), load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"  1-element add: without {result['add_us']:6.2f} us, with transfer_to_npu "
          f"{result['add_transfer_us']:6.2f} us, ratio {result['ratio']:.2f} (budget <= {BUDGET}) {verdict}")
    print(f"  small MLP forward: without {result['mlp_us']:6.1f} us, with transfer_to_npu "
          f"{result['mlp_transfer_us']:6.1f} us, ratio {result['mlp_ratio']:.2f}")
    print(f"  for comparison, with its TorchFunctionMode on the stack: add {result['mode_ratio']:.2f}, "
          f"MLP {result['mlp_mode_ratio']:.2f}; a minimal Python mode: add "
          f"{result['python_mode_ratio']:.2f}, MLP {result['mlp_python_mode_ratio']:.2f}")
    if options.compiled:
        print(f"  small MLP compiled by Inductor, per call: without {result['compiled_mlp_us']:6.1f} us, "
              f"with transfer_to_npu {result['compiled_mlp_transfer_us']:6.1f} us, "
              f"ratio {result['compiled_mlp_ratio']:.2f}")


if __name__ == "__main__":
    main()
