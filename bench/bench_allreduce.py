"""all_reduce bus bandwidth of npu tensors over hccl against cpu tensors over Gloo, 2 processes.

hccl hands Gloo CPU tensors over the npu tensors' own memory, so the bytes take the same
path; the difference is the backend's own work (signature check, npu work objects). Both
run in one process group (``"cpu:gloo,npu:hccl"``): for each size, blocks of npu and cpu
all_reduces alternate, and the ratio is the median of the back-to-back pairs' ratios. Goal: ratio >= 0.9 at every size.

    python bench/bench_allreduce.py [--samples N] [--json]     (starts torchrun itself)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from two_rank_launch import run_two_ranks

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def _calls(nbytes: int) -> int:
    # At least 8 calls a block: with fewer, one preemption on a loaded host decides the sample.
    return max(8, min(100, (16 << 20) // nbytes))


def worker(samples: int, sizes: list[int]) -> None:
    import torch
    import torch.distributed as dist

    import torch_npu  # noqa: F401

    local = int(os.environ["LOCAL_RANK"])
    torch.npu.set_device(local)
    dist.init_process_group("cpu:gloo,npu:hccl")
    world = dist.get_world_size()
    rows = []
    for nbytes in sizes:
        n = nbytes // 4
        tensors = {"npu": torch.ones(n, device="npu"), "cpu": torch.ones(n)}
        calls = _calls(nbytes)
        times: dict[str, list[float]] = {"npu": [], "cpu": []}
        for t in tensors.values():  # warm up both paths
            for _ in range(3):
                dist.all_reduce(t)
        pair_ratios = []
        for i in range(samples):
            # ABBA order, so that a drift in machine load does not favour one side.
            for kind in (("npu", "cpu") if i % 2 == 0 else ("cpu", "npu")):
                t = tensors[kind]
                dist.barrier()
                start = time.perf_counter()
                for _ in range(calls):
                    dist.all_reduce(t)
                times[kind].append((time.perf_counter() - start) / calls)
            # Bandwidth ratio of the two blocks measured back to back: on a shared host the
            # load changes between samples far more than within one pair.
            pair_ratios.append(times["cpu"][-1] / times["npu"][-1])
        med = {k: statistics.median(v) for k, v in times.items()}
        stats = dist.group.WORLD._get_backend(torch.device("npu"))._arrival_stats()
        # Bus bandwidth as nccl-tests defines it for all_reduce: 2 (n-1)/n bytes per rank.
        bus = {k: 2 * (world - 1) / world * nbytes / med[k] / 1e9 for k in med}
        rows.append({"bytes": nbytes, "npu_us": med["npu"] * 1e6, "cpu_us": med["cpu"] * 1e6,
                     "npu_GBps": bus["npu"], "cpu_GBps": bus["cpu"], "ratio": statistics.median(pair_ratios),
                     "ratio_of_medians": bus["npu"] / bus["cpu"],
                     "arrivals": stats})
    if dist.get_rank() == 0:
        print("ROWS " + json.dumps(rows), flush=True)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=41)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated byte counts")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.samples, [int(b) for b in args.sizes.split(",")])
        return
    load = os.getloadavg()[0]
    rows = run_two_ranks(__file__, [f"--samples={args.samples}", f"--sizes={args.sizes}"], "ROWS")
    if args.json:
        print(json.dumps({"load_average": load, "rows": rows}))
        return
    print(f"all_reduce, 2 processes, median of {args.samples} blocks (load average {load:.1f} on {os.cpu_count()} cores)")
    print(f"{'size':>8} {'npu us':>9} {'cpu us':>9} {'npu GB/s':>9} {'cpu GB/s':>9} {'ratio':>6}")
    for r in rows:
        size = f"{r['bytes'] >> 20} MB" if r["bytes"] >= 1 << 20 else f"{r['bytes'] >> 10} KB"
        print(f"{size:>8} {r['npu_us']:9.1f} {r['cpu_us']:9.1f} {r['npu_GBps']:9.3f} {r['cpu_GBps']:9.3f} "
              f"{r['ratio']:6.2f}")
    print("ratio: median over the samples of npu/cpu bus bandwidth in back-to-back blocks")
    print(f"goal: ratio >= 0.9 at every size; worst {min(r['ratio'] for r in rows):.2f}")


if __name__ == "__main__":
    main()
