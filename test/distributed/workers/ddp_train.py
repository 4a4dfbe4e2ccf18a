"""DDP training on npu over hccl, against the same run on cpu over gloo and a single process.

Each rank trains on its half of every global batch, with small buckets (several buckets
per step) and gradient accumulation under no_sync(). Rank 0 also trains the model alone on
the concatenated batches. Usage: ddp_train.py [eager|compile] [steps].
"""
from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from harness import listed, local_rank, report, use_local_npu

mode = sys.argv[1] if len(sys.argv) > 1 else "eager"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 4
ACCUMULATE = 2  # micro-batches per optimizer step; the first runs under no_sync()
MICRO = 6  # samples per rank per micro-batch

dev = use_local_npu()
dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")


class Net(torch.nn.Module):
    # A module of this file, not torch.nn.Sequential: under torch.compile(ddp) Dynamo compiles
    # the wrapped module's forward as its own frame, and skips frames of torch's own modules.
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(12, 32)
        self.mid = torch.nn.Linear(32, 32)
        self.out = torch.nn.Linear(32, 3)

    def forward(self, x):
        return self.out(torch.relu(self.mid(torch.tanh(self.inp(x)))))


def make_model():
    torch.manual_seed(0)
    return Net()


def batches():
    g = torch.Generator().manual_seed(1234)
    for _ in range(steps):
        yield [(torch.randn(world * MICRO, 12, generator=g), torch.randn(world * MICRO, 3, generator=g))
               for _ in range(ACCUMULATE)]


def train_ddp(device, group):
    model = make_model().to(device)
    # Small buckets (several per step) in eager mode; Dynamo's DDPOptimizer requires buckets
    # no smaller than DDP's 1 MB first bucket.
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.002 if mode != "compile" else 1,
              device_ids=[local_rank()] if device.type == "npu" and mode != "no_device_ids" else None)
    step_fn = torch.compile(ddp) if mode == "compile" else ddp
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for micro_batches in batches():
        opt.zero_grad()
        for k, (x, y) in enumerate(micro_batches):
            x = x[rank * MICRO:(rank + 1) * MICRO].to(device)
            y = y[rank * MICRO:(rank + 1) * MICRO].to(device)
            if k < ACCUMULATE - 1:
                with ddp.no_sync():
                    loss = torch.nn.functional.mse_loss(step_fn(x), y)
                    loss.backward()
            else:
                loss = torch.nn.functional.mse_loss(step_fn(x), y)
                loss.backward()
            losses.append(loss.item())
        opt.step()
    buckets = [b.buffer().numel() for b in ddp.reducer._get_zeros_like_grad_buckets()]
    return [p.detach().cpu() for p in model.parameters()], losses, buckets


def train_alone():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for micro_batches in batches():
        opt.zero_grad()
        for x, y in micro_batches:
            # DDP averages the ranks' mean losses: with equal shards that is the mean loss.
            torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


npu_params, npu_losses, buckets = train_ddp(dev, None)
compiled = {}
if mode == "compile":
    from torch._dynamo.utils import counters

    import torch._inductor.metrics

    compiled = {"graphs": counters["stats"]["unique_graphs"],
                "inductor_compiles": sum(counters["inductor"][k] for k in ("fxgraph_cache_miss", "fxgraph_cache_hit")),
                "kernels": torch._inductor.metrics.generated_kernel_count}
cpu_params, cpu_losses, _ = train_ddp(torch.device("cpu"), gloo)
result = {
    **compiled,
    "buckets": buckets,
    "npu_equals_gloo_cpu": all(torch.equal(a, b) for a, b in zip(npu_params, cpu_params)),
    "max_diff_vs_gloo_cpu": max((a - b).abs().max().item() for a, b in zip(npu_params, cpu_params)),
    "losses": npu_losses,
    "first_weight": listed(npu_params[0].flatten()[:4]),
}
# The ranks must hold the same weights.
gathered = [None] * world
dist.all_gather_object(gathered, [listed(p) for p in npu_params])
result["ranks_agree"] = all(g == gathered[0] for g in gathered)
if rank == 0:
    alone = train_alone()
    result["max_diff_vs_single_process"] = max((a - b).abs().max().item() for a, b in zip(npu_params, alone))
    result["close_to_single_process"] = all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(npu_params, alone))
    result["weights_moved"] = max((a - b).abs().max().item() for a, b in zip(alone, make_model().parameters())) > 1e-3
report(**result)
dist.destroy_process_group()
