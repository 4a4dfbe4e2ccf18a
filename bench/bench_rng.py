"""Per-call cost of npu random calls against the same call on cpu, side by side in one process.

Every npu random call refills its Mersenne-Twister engine from Philox at the generator's
(seed, offset) and counts afterwards what the kernel drew; this measures what that costs
on a tiny draw (4 values: a partial fill of a few Philox blocks), on a draw past the
partial-fill limit of 227 values (300: all 156 blocks) and on a large one (where counting
regenerated blocks is the extra). Blocks of calls alternate between cpu and npu; medians
are compared.

    python bench/bench_rng.py [--samples N] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

import torch_npu  # noqa: F401  (registers the npu device)

CASES = {"rand_4": (4, 2000), "rand_300": (300, 2000), "rand_1m": (1 << 20, 5)}


def _block_seconds(device: str, numel: int, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        torch.rand(numel, device=device)
    return (time.perf_counter() - start) / calls


def measure(samples: int) -> dict[str, dict[str, float]]:
    out = {}
    for name, (numel, calls) in CASES.items():
        for device in ("cpu", "npu"):
            _block_seconds(device, numel, calls)  # warm-up
        times = {"cpu": [], "npu": []}
        for _ in range(samples):
            for device in ("cpu", "npu"):
                times[device].append(_block_seconds(device, numel, calls))
        cpu, npu = statistics.median(times["cpu"]), statistics.median(times["npu"])
        out[name] = {"cpu_us": cpu * 1e6, "npu_us": npu * 1e6, "npu_over_cpu": npu / cpu}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.samples)
    if args.json:
        print(json.dumps(result))
        return
    for name, r in result.items():
        print(f"{name}: cpu {r['cpu_us']:.2f} us, npu {r['npu_us']:.2f} us, npu/cpu {r['npu_over_cpu']:.2f}x")


if __name__ == "__main__":
    main()
