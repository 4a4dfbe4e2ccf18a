"""What ``import torch_npu`` costs code that never touches an npu tensor.

Importing torch_npu changes the process beyond the npu device: the CPU allocator is
wrapped by the npu's redirect, the dispatcher gets fallthroughs on the Conjugate/Negative
keys of ``aten::_copy_from``, import finders and fork/exit handlers are installed (the
process-wide entries of ``torch_npu._patches.REGISTRATIONS``). This bench runs a cpu-only
workload in fresh interpreters with and without ``import torch_npu``, alternating, and
reports the median over rounds of the per-round ratio (with ÷ without), per workload:

* ``eager``: small-tensor eager ops (8×8 float: add, mul, relu, matmul, sum, a conjugate
  copy of a complex tensor, cat, indexing), each allocating its output;
* ``mlp_step``: a training step of a small MLP (64→128→10, batch 32, cross-entropy, SGD).

Both run on one intra-op thread (steadier on a shared machine); each child reports the
median of its timed blocks. TORCH_DEVICE_BACKEND_AUTOLOAD=0 keeps the baseline free of
torch_npu (autoload would import it with torch).

    python bench/bench_cpu_only.py [--rounds N] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = """
import json, statistics, time
import torch
{import_line}
torch.set_num_threads(1)
torch.manual_seed(0)

a, b = torch.randn(8, 8), torch.randn(8, 8)
z = torch.randn(8, 8, dtype=torch.complex64)
out = torch.empty(8, 8, dtype=torch.complex64)
index = torch.tensor([0, 2, 4])

def eager():
    c = (a + b).mul(2.0).relu()
    d = c @ b
    out.copy_(z.conj())
    e = torch.cat([c, d])[index]
    return e.sum()

model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

def mlp_step():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()

def per_call(fn, calls, blocks):
    for _ in range(calls):
        fn()
    times = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)

print(json.dumps({{"eager": per_call(eager, 400, 15), "mlp_step": per_call(mlp_step, 100, 15)}}))
"""

WORKLOADS = ("eager", "mlp_step")


def run_child(with_torch_npu: bool) -> dict[str, float]:
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", OMP_NUM_THREADS="1")
    code = CHILD.format(import_line="import torch_npu" if with_torch_npu else "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         timeout=300).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (at least 3)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args()
    rounds = max(args.rounds, 3)

    ratios: dict[str, list[float]] = {w: [] for w in WORKLOADS}
    times: dict[str, dict[str, list[float]]] = {side: {w: [] for w in WORKLOADS} for side in ("torch", "torch_npu")}
    for r in range(rounds):
        # Alternate which side goes first so a drift of load within a round cancels out.
        order = (False, True) if r % 2 == 0 else (True, False)
        results = {flag: run_child(flag) for flag in order}
        for w in WORKLOADS:
            ratios[w].append(results[True][w] / results[False][w])
            times["torch"][w].append(results[False][w])
            times["torch_npu"][w].append(results[True][w])

    summary = {
        "rounds": rounds,
        **{f"{w}_ratio": statistics.median(ratios[w]) for w in WORKLOADS},
        **{f"{w}_ratio_range": [min(ratios[w]), max(ratios[w])] for w in WORKLOADS},
        **{f"{w}_us_{side}": statistics.median(times[side][w]) * 1e6 for w in WORKLOADS for side in times},
        "load_average": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"cpu-only workload, with ÷ without import torch_npu, median of {rounds} alternating rounds "
              f"(fresh interpreters, 1 thread, load {summary['load_average']:.1f})")
        for w in WORKLOADS:
            lo, hi = summary[f"{w}_ratio_range"]
            print(f"  {w:9s} {summary[f'{w}_ratio']:.3f} x  (rounds {lo:.3f}–{hi:.3f}; "
                  f"{summary[f'{w}_us_torch']:.1f} µs vs {summary[f'{w}_us_torch_npu']:.1f} µs a call)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
