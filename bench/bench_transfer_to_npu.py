"""Cost of transfer_to_npu's device mode on a 1-element add, side by side in one process.

After ``import torch_npu.contrib.transfer_to_npu`` every torch call passes through the mode.
This times blocks of 1-element npu adds with the mode on the stack and with it taken off
(``torch.overrides._pop_mode_temporarily``), alternating, and reports the median of the
ratios of neighbouring blocks (robust to the load drifting during the run; budget <= 1.3).
Blocks are short (100 calls, about 0.2 ms): on a loaded machine most of them run without
being preempted, where long blocks all absorb preemptions and their ratio scatters. For comparison it also
times a minimal Python TorchFunctionMode (``return func(*args, **kwargs)``): the C handler
saves only the Python frame; most of the mode's cost is PyTorch's own torch-function
dispatch (per call: the handler looked up by name, the mode stashed and restored, the
call's types tuple built, the operator's arguments parsed a second time). The load average
is printed with the figures.

    python bench/bench_transfer_to_npu.py [--samples N] [--calls N] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

import torch_npu.contrib.transfer_to_npu  # noqa: F401  (applies the group)
from torch.overrides import TorchFunctionMode, _pop_mode_temporarily

BUDGET = 1.3


class MinimalPythonMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _block(a, b, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        a + b
    return (time.perf_counter() - start) / calls


def run(samples: int, calls: int) -> dict[str, float]:
    a = torch.ones(1, device="cuda")  # npu, through the mode
    b = torch.ones(1, device="cuda")
    plain, transfer, python_mode = [], [], []
    _block(a, b, calls)  # warm up
    for _ in range(samples):
        transfer.append(_block(a, b, calls))
        with _pop_mode_temporarily():
            plain.append(_block(a, b, calls))
            with MinimalPythonMode():
                python_mode.append(_block(a, b, calls))
    p, t = statistics.median(plain), statistics.median(transfer)
    return {
        "add_us": p * 1e6,
        "add_transfer_us": t * 1e6,
        "ratio": statistics.median(x / y for x, y in zip(transfer, plain)),
        "python_mode_ratio": statistics.median(x / y for x, y in zip(python_mode, plain)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=801)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    load = os.getloadavg()
    result = run(options.samples, options.calls)
    if options.json:
        print(json.dumps({"load": load, **result}, indent=2))
        return
    verdict = "OK" if result["ratio"] <= BUDGET else "over budget"
    print(f"1-element npu add, median of {options.samples} blocks of {options.calls}, "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"  without the mode   {result['add_us']:6.2f} us")
    print(f"  transfer_to_npu    {result['add_transfer_us']:6.2f} us   ratio {result['ratio']:.2f}  "
          f"(budget <= {BUDGET})  {verdict}")
    print(f"  minimal Python mode (for comparison)     ratio {result['python_mode_ratio']:.2f}")


if __name__ == "__main__":
    main()
