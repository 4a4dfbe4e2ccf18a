"""DDP training-step time on npu over hccl against the same step on cpu over Gloo, 2 processes.

Both models live in one process group (``"cpu:gloo,npu:hccl"``) and train the same MLP on
the same batches; blocks of npu and cpu steps alternate, and the ratio is the median of the ratios of back-to-back blocks.
Goal: npu step time <= 1.1x the cpu/gloo step time.

    python bench/bench_ddp.py [--samples N] [--steps N] [--json]     (starts torchrun itself)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from two_rank_launch import run_two_ranks


def worker(samples: int, steps: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torch_npu  # noqa: F401

    local = int(os.environ["LOCAL_RANK"])
    torch.npu.set_device(local)
    dist.init_process_group("cpu:gloo,npu:hccl")

    def build(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024), torch.nn.GELU(),
            torch.nn.Linear(1024, 256),
        ).to(device)
        ddp = DDP(model, device_ids=[local] if device.type == "npu" else None)
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        x = torch.randn(64, 256).to(device)
        y = torch.randn(64, 256).to(device)

        def step():
            opt.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()

        return step

    steps_fn = {"npu": build(torch.device("npu", local)), "cpu": build(torch.device("cpu"))}
    for fn in steps_fn.values():
        for _ in range(3):
            fn()
    times: dict[str, list[float]] = {"npu": [], "cpu": []}
    pair_ratios = []
    for i in range(samples):
        for kind in (("npu", "cpu") if i % 2 == 0 else ("cpu", "npu")):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(steps):
                steps_fn[kind]()
            times[kind].append((time.perf_counter() - start) / steps)
        pair_ratios.append(times["npu"][-1] / times["cpu"][-1])  # blocks measured back to back
    med = {k: statistics.median(v) for k, v in times.items()}
    if dist.get_rank() == 0:
        params = sum(p.numel() for p in torch.nn.Linear(256, 1024).parameters()) * 2 + 1024 * 1025
        print("ROW " + json.dumps({"npu_ms": med["npu"] * 1e3, "cpu_ms": med["cpu"] * 1e3,
                                   "ratio": statistics.median(pair_ratios),
                                   "ratio_of_medians": med["npu"] / med["cpu"], "params": params}), flush=True)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=11)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.samples, args.steps)
        return
    load = os.getloadavg()[0]
    row = run_two_ranks(__file__, [f"--samples={args.samples}", f"--steps={args.steps}"], "ROW")
    if args.json:
        print(json.dumps({"load_average": load, **row}))
        return
    print(f"DDP step (MLP, {row['params'] / 1e6:.1f}M parameters, batch 64 per rank), 2 processes, median of "
          f"{args.samples} blocks of {args.steps} steps (load average {load:.1f} on {os.cpu_count()} cores)")
    print(f"npu/hccl {row['npu_ms']:.2f} ms   cpu/gloo {row['cpu_ms']:.2f} ms   ratio {row['ratio']:.2f}"
          "   (goal <= 1.1)")


if __name__ == "__main__":
    main()
