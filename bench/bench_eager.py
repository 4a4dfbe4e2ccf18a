"""Eager overhead of the npu device against CPU, measured side by side in one process.

npu kernels run the CPU kernels on the same host memory, so the difference is the cost
of the npu dispatch path (device guard, allocator, dispatcher). Each case times blocks
of calls, alternating cpu and npu blocks, and compares medians. Budgets: a 1-element add,
mul, relu, tanh, silu, in-place add or multiplication by a Python number, a 1-row layer norm, softmax
or linear layer (64 features), where, masked_fill, comparisons, cos, `to(float)`, zeros and cat <= 3x CPU;
a 512x512 matmul and a 1M-element pointwise op <= 1.10x CPU.

    python bench/bench_eager.py [--samples N] [--calls N] [--threads N] [--only CASE,...] [--json]
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


def _case_add_1(device: str) -> Callable[[], object]:
    a = torch.ones(1, device=device)
    b = torch.ones(1, device=device)
    return lambda: a + b


def _case_mul_1(device: str) -> Callable[[], object]:
    a = torch.ones(1, device=device)
    b = torch.ones(1, device=device)
    return lambda: a * b


def _case_add_inplace_1(device: str) -> Callable[[], object]:
    a = torch.ones(1, device=device)
    b = torch.ones(1, device=device)
    return lambda: a.add_(b)


def _case_mul_number_1(device: str) -> Callable[[], object]:
    # The Python number arrives as a cpu 0-dim tensor of another dtype (float64).
    a = torch.ones(1, device=device)
    return lambda: a * 0.5


def _case_relu_1(device: str) -> Callable[[], object]:
    a = torch.ones(1, device=device)
    return lambda: torch.relu(a)


def _case_tanh_1(device: str) -> Callable[[], object]:
    a = torch.ones(1, device=device)
    return lambda: torch.tanh(a)


def _case_silu_1(device: str) -> Callable[[], object]:
    a = torch.ones(1, device=device)
    return lambda: torch.nn.functional.silu(a)


def _case_where_1(device: str) -> Callable[[], object]:
    a = torch.ones(1, device=device)
    b = torch.zeros(1, device=device)
    cond = torch.ones(1, dtype=torch.bool, device=device)
    return lambda: torch.where(cond, a, b)


def _case_where_number_1(device: str) -> Callable[[], object]:
    # where.ScalarOther: the number becomes a 0-dim tensor of the device first.
    a = torch.ones(1, device=device)
    cond = torch.ones(1, dtype=torch.bool, device=device)
    return lambda: torch.where(cond, a, 0.0)


def _case_masked_fill_1(device: str) -> Callable[[], object]:
    # The functional form: a clone, then masked_fill_.
    a = torch.ones(1, device=device)
    mask = torch.ones(1, dtype=torch.bool, device=device)
    return lambda: a.masked_fill(mask, 0.0)


def _case_masked_fill_inplace_1(device: str) -> Callable[[], object]:
    a = torch.ones(1, device=device)
    mask = torch.ones(1, dtype=torch.bool, device=device)
    return lambda: a.masked_fill_(mask, 0.0)


def _case_eq_number_1(device: str) -> Callable[[], object]:
    a = torch.ones(1, device=device)
    return lambda: a == 0


def _case_gt_1(device: str) -> Callable[[], object]:
    a = torch.ones(1, device=device)
    b = torch.zeros(1, device=device)
    return lambda: a > b


def _case_cos_1(device: str) -> Callable[[], object]:
    a = torch.ones(1, device=device)
    return lambda: torch.cos(a)


def _case_to_float_1(device: str) -> Callable[[], object]:
    # A dtype-converting copy between two tensors of the device (_to_copy: empty, copy_).
    a = torch.ones(1, dtype=torch.int64, device=device)
    return lambda: a.to(torch.float32)


def _case_zeros_1(device: str) -> Callable[[], object]:
    return lambda: torch.zeros(1, device=device)


def _case_cat_1(device: str) -> Callable[[], object]:
    a = torch.ones(1, device=device)
    b = torch.zeros(1, device=device)
    return lambda: torch.cat([a, b])


def _case_layer_norm_1_row(device: str) -> Callable[[], object]:
    gen = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*shape, generator=gen).to(device) for shape in ((1, 64), (64,), (64,)))
    return lambda: torch.nn.functional.layer_norm(x, (64,), w, b)


def _case_softmax_1_row(device: str) -> Callable[[], object]:
    x = torch.randn(1, 64, generator=torch.Generator().manual_seed(0)).to(device)
    return lambda: torch.softmax(x, dim=-1)


def _case_linear_1_row(device: str) -> Callable[[], object]:
    gen = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*shape, generator=gen).to(device) for shape in ((1, 64), (64, 64), (64,)))
    return lambda: torch.nn.functional.linear(x, w, b)


def _case_matmul_512(device: str) -> Callable[[], object]:
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(512, 512, generator=gen).to(device)
    b = torch.randn(512, 512, generator=gen).to(device)
    return lambda: a @ b


def _case_pointwise_1m(device: str) -> Callable[[], object]:
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(1 << 20, generator=gen).to(device)
    b = torch.randn(1 << 20, generator=gen).to(device)
    return lambda: a + b


# name -> (builder, calls per timed block, budget ratio)
CASES = {
    "add_1_element": (_case_add_1, 2000, 3.0),
    "mul_1_element": (_case_mul_1, 2000, 3.0),
    "add_inplace_1_element": (_case_add_inplace_1, 2000, 3.0),
    "mul_number_1_element": (_case_mul_number_1, 2000, 3.0),
    "relu_1_element": (_case_relu_1, 2000, 3.0),
    "tanh_1_element": (_case_tanh_1, 2000, 3.0),
    "silu_1_element": (_case_silu_1, 2000, 3.0),
    "where_1_element": (_case_where_1, 2000, 3.0),
    "where_number_1_element": (_case_where_number_1, 2000, 3.0),
    "masked_fill_1_element": (_case_masked_fill_1, 2000, 3.0),
    "masked_fill_inplace_1_element": (_case_masked_fill_inplace_1, 2000, 3.0),
    "eq_number_1_element": (_case_eq_number_1, 2000, 3.0),
    "gt_1_element": (_case_gt_1, 2000, 3.0),
    "cos_1_element": (_case_cos_1, 2000, 3.0),
    "to_float_1_element": (_case_to_float_1, 2000, 3.0),
    "zeros_1_element": (_case_zeros_1, 2000, 3.0),
    "cat_1_element": (_case_cat_1, 2000, 3.0),
    "layer_norm_1_row": (_case_layer_norm_1_row, 2000, 3.0),
    "softmax_1_row": (_case_softmax_1_row, 2000, 3.0),
    "linear_1_row": (_case_linear_1_row, 2000, 3.0),
    "matmul_512x512": (_case_matmul_512, 20, 1.10),
    "pointwise_add_1M": (_case_pointwise_1m, 50, 1.10),
}


def _time_block(fn: Callable[[], object], calls: int, sync: Callable[[], None]) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls


def run_case(name: str, samples: int, calls_override: int = 0) -> dict[str, float]:
    build, calls, budget = CASES[name]
    calls = calls_override or calls
    fns = {"cpu": build("cpu"), "npu": build("npu")}
    syncs = {"cpu": lambda: None, "npu": torch.npu.synchronize}
    for device in ("cpu", "npu"):  # warm-up: allocator caches, thread pools, lazy init
        _time_block(fns[device], calls, syncs[device])
    times: dict[str, list[float]] = {"cpu": [], "npu": []}
    for i in range(samples):
        order = ("cpu", "npu") if i % 2 == 0 else ("npu", "cpu")
        for device in order:
            times[device].append(_time_block(fns[device], calls, syncs[device]))
    cpu = statistics.median(times["cpu"])
    npu = statistics.median(times["npu"])
    return {"cpu_us": cpu * 1e6, "npu_us": npu * 1e6, "ratio": npu / cpu, "budget": budget, "ok": npu / cpu <= budget}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=31, help="timed blocks per device and case")
    parser.add_argument("--calls", type=int, default=0, help="calls per timed block (default: per case)")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (default: torch's choice)")
    parser.add_argument("--only", default="", help="comma-separated cases to run (default: all)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    names = args.only.split(",") if args.only else list(CASES)
    unknown = [name for name in names if name not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    results = {name: run_case(name, args.samples, args.calls) for name in names}
    if args.json:
        print(json.dumps({"threads": torch.get_num_threads(), "cases": results}, indent=2))
    else:
        print(f"eager npu vs cpu, median of {args.samples} alternating blocks, {torch.get_num_threads()} threads")
        print(f"  {'case':<30}{'cpu':>12}{'npu':>12}{'ratio':>9}{'budget':>9}")
        for name, r in results.items():
            print(
                f"  {name:<30}{r['cpu_us']:>10.2f}us{r['npu_us']:>10.2f}us{r['ratio']:>8.2f}x"
                f"{r['budget']:>8.2f}x  {'OK' if r['ok'] else 'OVER'}"
            )
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
