"""DTensor's offset-based parallel RNG on npu: random initialisation of sharded and replicated
DTensors, each rank's local values compared with a plain npu call at the offset DTensor
gives that rank, and replicas compared across ranks."""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor._random import _PhiloxState

from harness import listed, report, same, use_local_npu

dev = use_local_npu()
dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("npu", (world,))
result: dict = {}


def state_at(offset: int) -> torch.Tensor:
    state = _PhiloxState(torch.npu.get_rng_state())
    state.offset = torch.tensor([offset], dtype=torch.int64)
    return state.state


def current_offset() -> int:
    return int(_PhiloxState(torch.npu.get_rng_state()).offset.item())


def plain_at(offset: int, fill) -> torch.Tensor:
    """``fill`` on a fresh npu tensor drawn at ``offset``, the generator left as it was."""
    with torch.random.fork_rng(devices=[dev], device_type="npu"):
        torch.npu.set_rng_state(state_at(offset))
        return fill()


def gathered(t: torch.Tensor) -> list[torch.Tensor]:
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous())
    return parts


torch.manual_seed(1234)
result["state_bytes"] = torch.npu.get_rng_state().numel()

# 1. torch.nn.init on a row-sharded DTensor (8 x 6 over the ranks: 4 x 6 each).
sharded = distribute_tensor(torch.empty(8, 6, device=dev), mesh, [Shard(0)])
start = current_offset()
torch.nn.init.uniform_(sharded, -1.0, 1.0)
local = sharded.to_local()
local_numel = local.numel()
expected = plain_at(start + (rank * local_numel + 3) // 4 * 4, lambda: torch.empty(4, 6, device=dev).uniform_(-1.0, 1.0))
result["init_shard_matches_plain_call"] = same(local, expected)
result["init_offset_after"] = current_offset() - start
parts = gathered(local)
result["init_shards_differ"] = not same(parts[0], parts[1])

# 2. torch.nn.init.normal_ on a column-sharded DTensor (5 x 8: 5 x 4 each).
cols = distribute_tensor(torch.empty(5, 8, device=dev), mesh, [Shard(1)])
start = current_offset()
torch.nn.init.normal_(cols, 0.0, 0.02)
local = cols.to_local()
expected = plain_at(start + (rank * local.numel() + 3) // 4 * 4,
                    lambda: torch.empty(5, 4, device=dev).normal_(0.0, 0.02))
result["normal_col_shard_matches_plain_call"] = same(local, expected)
result["normal_offset_after"] = current_offset() - start

# 3. A replicated DTensor: every rank draws the same values, at the unshifted offset.
rep = distribute_tensor(torch.empty(3, 5, device=dev), mesh, [Replicate()])
start = current_offset()
torch.nn.init.uniform_(rep)
local = rep.to_local()
parts = gathered(local)
result["replicas_equal"] = all(same(p, parts[0]) for p in parts)
result["replica_matches_plain_call"] = same(local, plain_at(start, lambda: torch.empty(3, 5, device=dev).uniform_()))
result["replica_values"] = listed(local[0])

# 4. DTensor's random factory, sharded: the full tensor has no repeated rows across shards.
full = torch.distributed.tensor.rand((6, 4), device_mesh=mesh, placements=[Shard(0)]).full_tensor()
result["factory_rows_distinct"] = len({tuple(r) for r in listed(full)}) == 6

dist.barrier()
report(**result)
dist.destroy_process_group()
