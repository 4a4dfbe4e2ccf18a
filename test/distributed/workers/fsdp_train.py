"""FSDP on npu over hccl: FSDP2 (fully_shard) in fp32 against a single process, FSDP2 with
mixed precision (bf16 params, fp32 reduce) against the same run on cpu over gloo, sharded
torch.distributed.checkpoint save/load with identical resumed training, and FSDP1.

Usage: fsdp_train.py <fsdp2|fsdp1|compile> <checkpoint dir>
"""
from __future__ import annotations

import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

from harness import report, use_local_npu

mode = sys.argv[1]
ckpt_dir = sys.argv[2] if len(sys.argv) > 2 else None
dev = use_local_npu()
dist.init_process_group("cpu:gloo,npu:hccl")
rank, world = dist.get_rank(), dist.get_world_size()
BATCH = 4  # per rank


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def make_model():
    torch.manual_seed(0)
    return Net()


def data(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(world * BATCH, 16, generator=g), torch.randn(world * BATCH, 4, generator=g)


def local(t, device):
    return t[rank * BATCH:(rank + 1) * BATCH].to(device)


def shard(model, device, mp=None, force_sum=False):
    mesh = init_device_mesh(device.type, (world,))
    kw = {"mesh": mesh}
    if mp is not None:
        kw["mp_policy"] = mp
    for b in model.blocks:
        fully_shard(b, **kw)
    fully_shard(model, **kw)
    if force_sum:
        model.set_force_sum_reduction_for_comms(True)
    return model


def train(model, opt, device, steps, first=0, compiled=False):
    step_fn = torch.compile(model) if compiled else model
    for s in range(first, first + steps):
        x, y = data(s)
        opt.zero_grad()
        torch.nn.functional.mse_loss(step_fn(local(x, device)), local(y, device)).backward()
        opt.step()


def full_params(model):
    out = []
    for p in model.parameters():
        p = p.full_tensor() if isinstance(p, DTensor) else p
        out.append(p.detach().float().cpu())
    return out


def max_diff(a, b):
    return max((x - y).abs().max().item() for x, y in zip(a, b))


def single_process(steps):
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for s in range(steps):
        x, y = data(s)
        opt.zero_grad()
        # FSDP averages the ranks' mean losses: with equal shards, the mean over the batch.
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


result = {}
if mode in ("fsdp2", "compile"):
    compiled = mode == "compile"
    model = shard(make_model().to(dev), dev)
    sharded = [p for p in model.parameters()]
    result["params_are_npu_dtensors"] = all(isinstance(p, DTensor) and p.device.type == "npu" for p in sharded)
    result["local_shard_rows"] = [p.to_local().shape[0] for p in sharded[:2]]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    train(model, opt, dev, 3, compiled=compiled)
    fp32 = full_params(model)
    ref = single_process(3)
    result["fp32_max_diff_vs_single_process"] = max_diff(fp32, ref)
    result["fp32_close_to_single_process"] = all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(fp32, ref))
    if compiled:
        from torch._dynamo.utils import counters
        import torch._inductor.metrics

        result["graphs"] = counters["stats"]["unique_graphs"]
        result["kernels"] = torch._inductor.metrics.generated_kernel_count
        # The same compiled training on eager: the numbers must agree.
        eager = shard(make_model().to(dev), dev)
        eager_opt = torch.optim.Adam(eager.parameters(), lr=1e-2)
        train(eager, eager_opt, dev, 3)
        result["compiled_max_diff_vs_eager"] = max_diff(fp32, full_params(eager))

if mode == "fsdp2":
    # Mixed precision: bf16 parameters and compute, gradients reduced in fp32, on npu/hccl
    # and on cpu/gloo (which has no ReduceOp.AVG: FSDP divides after a SUM there).
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    runs = {}
    for device in (dev, torch.device("cpu")):
        m = shard(make_model().to(device), device, mp, force_sum=device.type == "cpu")
        o = torch.optim.Adam(m.parameters(), lr=1e-2)
        train(m, o, device, 3)
        runs[device.type] = full_params(m)
        runs[device.type + "_dtype"] = str(next(m.parameters()).dtype)
    result["mixed_max_diff_vs_gloo_cpu"] = max_diff(runs["npu"], runs["cpu"])
    result["mixed_master_dtype"] = runs["npu_dtype"]
    result["mixed_moved_from_fp32_run"] = max_diff(runs["npu"], fp32) > 0

    # Sharded checkpoint: save after 3 steps, train 2 more; a fresh model that loads the
    # checkpoint and trains the same 2 steps must end with the same weights.
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=ckpt_dir)
    train(model, opt, dev, 2, first=3)
    continued = full_params(model)
    fresh = shard(make_model().to(dev), dev)
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=1e-2)
    train(fresh, fresh_opt, dev, 1, first=50)  # different state, so loading has to overwrite it
    msd, osd = get_state_dict(fresh, fresh_opt)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=ckpt_dir)
    set_state_dict(fresh, fresh_opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    result["loaded_shards_on_npu"] = all(p.to_local().device.type == "npu" for p in fresh.parameters())
    train(fresh, fresh_opt, dev, 2, first=3)
    result["resumed_equals_continued"] = all(torch.equal(a, b) for a, b in zip(continued, full_params(fresh)))

if mode == "fsdp1":
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    model = FSDP(make_model().to(dev), device_id=dev, use_orig_params=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for s in range(3):
        x, y = data(s)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(local(x, dev)), local(y, dev)).backward()
        opt.step()
    with FSDP.summon_full_params(model):
        params = [p.detach().float().cpu().clone() for p in model.parameters()]
    ref = single_process(3)
    result["fsdp1_max_diff_vs_single_process"] = max_diff(params, ref)
    result["fsdp1_close_to_single_process"] = all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(params, ref))
    result["flat_param_on_npu"] = all(p.device.type == "npu" for p in model.parameters())

report(**result)
dist.destroy_process_group()
