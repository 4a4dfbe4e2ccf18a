"""DeepSpeed, unchanged, trains a tiny model under each ZeRO stage and precision with
DeepSpeed's activation checkpointing, and reports every loss and the full fp32 weights.

The accelerator is DeepSpeed's own choice: ``npu`` because torch_npu is importable, or
``cpu`` when ``DS_ACCELERATOR=cpu``. The global batch is 8 samples a step whatever the
world size: 2 ranks of 4 samples, or one process accumulating 2 micro-batches of 4, so
the runs of one configuration are comparable.

Usage: deepspeed_train.py <stage,...> <fp32|bf16,...>   (under torchrun)
"""
from __future__ import annotations

import sys

import torch

import deepspeed
import deepspeed.comm as ds_dist
from deepspeed.accelerator import get_accelerator
from deepspeed.utils import safe_get_full_fp32_param
from harness import report
from torch_npu_census import census

MICRO_BATCH = 4
GLOBAL_BATCH = 8
STEPS = 3
WIDTH = 16
BUCKET = 1 << 16
# Below the gradient norms of every step: clipping scales every update.
CLIP = 0.1


class Block(torch.nn.Module):
    """Two layers whose activations DeepSpeed recomputes in the backward."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(WIDTH, WIDTH)
        self.outer = torch.nn.Linear(WIDTH, WIDTH)
        self.calls = 0  # forward passes: 2 a micro-batch when the backward recomputes

    def forward(self, x):
        self.calls += 1
        return self.outer(torch.nn.functional.gelu(self.inner(x)))


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(8, WIDTH)
        self.block = Block()
        self.head = torch.nn.Linear(WIDTH, 1)

    def forward(self, x):
        h = torch.tanh(self.embed(x))
        h = deepspeed.checkpointing.checkpoint(self.block, h)
        return self.head(h)


def config(stage: int, dtype: str, accumulation: int) -> dict:
    return {
        "train_micro_batch_size_per_gpu": MICRO_BATCH,
        "gradient_accumulation_steps": accumulation,
        "gradient_clipping": CLIP,
        # Buckets sized for a tiny model: the defaults (5e8 elements) exceed a small
        # TORCH_NPU_MEMORY_CAPACITY_MB, as they would a small card.
        "zero_optimization": {"stage": stage, "reduce_bucket_size": BUCKET, "allgather_bucket_size": BUCKET,
                              "stage3_prefetch_bucket_size": BUCKET},
        "bf16": {"enabled": dtype == "bf16"},
        "activation_checkpointing": {"partition_activations": False, "contiguous_memory_optimization": False},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


def data(dtype: torch.dtype, device):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS, GLOBAL_BATCH, 8, generator=g)
    y = x.sum(dim=-1, keepdim=True).sin()
    return x.to(device, dtype), y.to(device, dtype)


def train(stage: int, dtype_name: str) -> dict:
    world, rank = ds_dist.get_world_size(), ds_dist.get_rank()
    accumulation = GLOBAL_BATCH // (MICRO_BATCH * world)
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    cfg = config(stage, dtype_name, accumulation)
    deepspeed.checkpointing.configure(None, deepspeed_config=cfg)
    torch.manual_seed(0)
    model = TinyNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, foreach=False)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=cfg)
    x, y = data(dtype, engine.device)
    losses, norms = [], []
    for step in range(STEPS):
        for micro in range(accumulation):
            # Sample order: rank-major, then micro-batch: the same 8 samples a step either way.
            first = (rank * accumulation + micro) * MICRO_BATCH
            xb, yb = x[step, first:first + MICRO_BATCH], y[step, first:first + MICRO_BATCH]
            loss = torch.nn.functional.mse_loss(engine(xb).float(), yb.float())
            engine.backward(loss)
            engine.step()
            losses.append(loss.item())
        norms.append(float(engine.get_global_grad_norm()))
    weights = {name: safe_get_full_fp32_param(p).float().cpu().flatten().tolist()
               for name, p in engine.module.named_parameters()}
    block_calls = engine.module.block.calls
    device_types = sorted({p.device.type for p in engine.module.parameters()})
    engine.destroy()
    return {"losses": losses, "grad_norms": norms, "weights": weights, "param_device_types": device_types,
            "micro_batches": STEPS * accumulation, "block_forward_calls": block_calls}


def main() -> None:
    with census() as touched:
        run_all()
    report(touched=touched)


def run_all() -> None:
    stages = [int(s) for s in sys.argv[1].split(",")]
    dtypes = sys.argv[2].split(",")
    deepspeed.init_distributed()
    accel = get_accelerator()
    report(accelerator=accel.device_name(), backend=accel.communication_backend_name(),
           dist_backend=str(torch.distributed.get_backend()), world=ds_dist.get_world_size())
    for stage in stages:
        for dtype in dtypes:
            report(**{f"zero{stage}_{dtype}": train(stage, dtype)})


if __name__ == "__main__":
    main()
