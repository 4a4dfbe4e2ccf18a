"""Worker of test_distributed.py (run under torchrun): Ascend's extra distributed names over hccl.

Each rank reports what it saw; the expected values are computed on cpu from the same seeds.
"""
from __future__ import annotations

import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "distributed", "workers"))

import faulthandler  # noqa: E402

# torchrun's workers run in sessions of their own, out of the launcher's kill: a hung
# collective ends the worker here, with its stack, instead of outliving the test.
faulthandler.dump_traceback_later(120, exit=True)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from harness import listed, report, use_local_npu  # noqa: E402

dev = use_local_npu()
import torch_npu  # noqa: E402
import torch_npu.distributed as npu_dist  # noqa: E402

dist.init_process_group("hccl", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
splits = [r + 2 for r in range(world)]  # uneven: 2, 3, ... rows


def rows_of(r):
    g = torch.Generator().manual_seed(100 + r)
    return torch.randint(-50, 50, (sum(splits), 3), generator=g).float()


results = {}
# reduce_scatter_tensor_uneven, sync and async
full = rows_of(rank).to(dev)
for mode in ("sync", "async"):
    out = torch.empty(splits[rank], 3, device=dev)
    work = npu_dist.reduce_scatter_tensor_uneven(out, full, input_split_sizes=splits, async_op=(mode == "async"))
    if mode == "async":
        work.wait()
    else:
        assert work is None
    results[f"reduce_scatter_{mode}"] = listed(out)
# all_gather_into_tensor_uneven, sync and async
mine = (torch.arange(splits[rank] * 3, dtype=torch.float32).reshape(splits[rank], 3) + 100 * rank).to(dev)
for mode in ("sync", "async"):
    gathered = torch.empty(sum(splits), 3, device=dev)
    work = npu_dist.all_gather_into_tensor_uneven(gathered, mine, output_split_sizes=splits,
                                                  async_op=(mode == "async"))
    if mode == "async":
        work.wait()
    results[f"all_gather_{mode}"] = listed(gathered)
# a wrong split is a clear error, and the group still works afterwards
try:
    npu_dist.reduce_scatter_tensor_uneven(torch.empty(1, 3, device=dev), full, input_split_sizes=[1] * world)
    results["bad_split"] = "no error"
except ValueError as exc:
    results["bad_split"] = str(exc)
# reinit_process_group keeps a working group
npu_dist.reinit_process_group()
npu_dist.reinit_process_group(rebuild_link=False)
after = torch.ones(2, device=dev) * (rank + 1)
dist.all_reduce(after)
results["all_reduce_after_reinit"] = listed(after)
results["is_hccl_available"] = npu_dist.is_hccl_available() and npu_dist.distributed_c10d.is_hccl_available()
results["is_available"] = npu_dist.is_available()
# fsdp.fully_shard: a sharded Linear computes what the whole one does
torch.manual_seed(0)
whole = torch.nn.Linear(4, 2)
sharded = torch.nn.Linear(4, 2).to(dev)
sharded.load_state_dict(whole.state_dict())
npu_dist.fsdp.fully_shard(sharded)
x = torch.randn(3, 4)
results["fsdp_max_diff"] = float((sharded(x.to(dev)).detach().cpu() - whole(x).detach()).abs().max())
results["fsdp_class"] = type(sharded).__name__
# utils.syncbatchnorm.SyncBatchNorm: statistics over both ranks' rows
from torch_npu.utils.syncbatchnorm import SyncBatchNorm  # noqa: E402

g = torch.Generator().manual_seed(7)
full_x = torch.randn(2 * world, 3, 4, generator=g)
full_grad = torch.randn(2 * world, 3, 4, generator=g)
weight, bias = torch.randn(3, generator=g), torch.randn(3, generator=g)
x = full_x[2 * rank:2 * rank + 2].to(dev).requires_grad_()
w, b = weight.to(dev).requires_grad_(), bias.to(dev).requires_grad_()
running_mean, running_var = torch.zeros(3, device=dev), torch.ones(3, device=dev)
y = SyncBatchNorm.apply(x, w, b, running_mean, running_var, 1e-5, 0.1, dist.group.WORLD, world)
y.backward(full_grad[2 * rank:2 * rank + 2].to(dev))
results.update(sbn_out=listed(y), sbn_x_grad=listed(x.grad), sbn_w_grad=listed(w.grad), sbn_b_grad=listed(b.grad),
               sbn_running_mean=listed(running_mean), sbn_running_var=listed(running_var))
report(**results)
dist.destroy_process_group()
