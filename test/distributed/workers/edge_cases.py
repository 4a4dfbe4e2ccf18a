"""Edge cases of the hccl backend, on each rank of one launch: data-movement collectives of
dtypes the transport lacks (float8, uint16/32/64) move bytes, reductions of them raise a
clear error first; all_to_all of tensors of different sizes; recv from the own rank is an
argument error; after each refused call the group is still usable.

Every rank computes every rank's data (seeded by rank), so the expected results come from
cpu tensors of this process. Usage: edge_cases.py
"""
from __future__ import annotations

import datetime

import torch
import torch.distributed as dist

from harness import report, use_local_npu

dev = use_local_npu()
dist.init_process_group("hccl", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
checked: list[str] = []
failures: list[str] = []
MOVED_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16, torch.uint32, torch.uint64)


def data(owner, numel, dtype, salt=0):
    """Random bit patterns of `owner` (every value of the dtype, NaNs of float8 included)."""
    g = torch.Generator().manual_seed(1000 * owner + salt)
    return torch.randint(0, 256, (numel * dtype.itemsize,), generator=g, dtype=torch.uint8).view(dtype)


def bits(t):
    return t.detach().cpu().reshape(-1).view(torch.uint8)


def expect(name, got, want):
    got = got if isinstance(got, (list, tuple)) else [got]
    want = want if isinstance(want, (list, tuple)) else [want]
    checked.append(name)
    ok = len(got) == len(want) and all(
        g.device.type == "npu" and g.dtype == w.dtype and g.shape == w.shape and torch.equal(bits(g), bits(w))
        for g, w in zip(got, want))
    if not ok:
        failures.append(f"{name}: {[bits(g)[:8].tolist() for g in got]} vs {[bits(w)[:8].tolist() for w in want]}")


def refused(name, fn, exc_type, first_line_words):
    """fn must raise exc_type whose first line has the words; the group must stay usable."""
    checked.append(name)
    try:
        fn()
        failures.append(f"{name}: did not raise")
    except exc_type as e:
        first = str(e).splitlines()[0]
        if not all(w in first for w in first_line_words):
            failures.append(f"{name}: first line {first!r} lacks {first_line_words}")
    except Exception as e:  # noqa: BLE001
        failures.append(f"{name}: raised {type(e).__name__}: {str(e)[:300]}")
    t = torch.full((3,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    if t.cpu().tolist() != [float(world * (world + 1) // 2)] * 3:
        failures.append(f"{name}: the group gave {t.cpu().tolist()} afterwards")


def moved(dtype):
    n = 6
    t = data(rank, n, dtype).to(dev)
    dist.broadcast(t, src=1)
    expect(f"broadcast {dtype}", t, data(1, n, dtype))

    outs = [torch.empty(n, dtype=dtype, device=dev) for _ in range(world)]
    dist.all_gather(outs, data(rank, n, dtype).to(dev))
    expect(f"all_gather {dtype}", outs, [data(r, n, dtype) for r in range(world)])

    flat = torch.empty(world * n, dtype=dtype, device=dev)
    dist.all_gather_into_tensor(flat, data(rank, n, dtype).to(dev))
    expect(f"all_gather_into_tensor {dtype}", flat, torch.cat([data(r, n, dtype) for r in range(world)]))

    rows = torch.empty(world * 2, 3, dtype=dtype, device=dev)
    dist.all_to_all_single(rows, data(rank, world * 6, dtype).view(world * 2, 3).to(dev))
    expect(f"all_to_all_single {dtype}", rows,
           torch.cat([data(r, world * 6, dtype).view(world * 2, 3)[2 * rank:2 * rank + 2] for r in range(world)]))

    outs = [torch.empty(4, dtype=dtype, device=dev) for _ in range(world)]
    dist.all_to_all(outs, [data(rank, 4, dtype, salt=j).to(dev) for j in range(world)])
    expect(f"all_to_all {dtype}", outs, [data(j, 4, dtype, salt=rank) for j in range(world)])

    out = torch.empty(5, dtype=dtype, device=dev)
    dist.scatter(out, [data(0, 5, dtype, salt=j).to(dev) for j in range(world)] if rank == 0 else None, src=0)
    expect(f"scatter {dtype}", out, data(0, 5, dtype, salt=rank))

    gathered = [torch.empty(5, dtype=dtype, device=dev) for _ in range(world)] if rank == 0 else None
    dist.gather(data(rank, 5, dtype).to(dev), gathered, dst=0)
    if rank == 0:
        expect(f"gather {dtype}", gathered, [data(r, 5, dtype) for r in range(world)])

    if rank < 2:
        buf = data(0, 7, dtype).to(dev) if rank == 0 else torch.empty(7, dtype=dtype, device=dev)
        dist.send(buf, dst=1) if rank == 0 else dist.recv(buf, src=0)
        if rank == 1:
            expect(f"send/recv {dtype}", buf, data(0, 7, dtype))


for dtype in MOVED_DTYPES:
    moved(dtype)

# Reductions: NCCL's error for float8; a clear one for the dtypes the transport cannot reduce.
for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
    refused(f"all_reduce {dtype} refused", lambda: dist.all_reduce(data(rank, 4, dtype).to(dev)), RuntimeError,
            ["Float8 dtypes are not currenlty supported for HCCL reductions"])
    refused(f"reduce_scatter_tensor {dtype} refused",
            lambda: dist.reduce_scatter_tensor(torch.empty(2, dtype=dtype, device=dev),
                                               data(rank, 2 * world, dtype).to(dev)),
            RuntimeError, ["Float8 dtypes are not currenlty supported for HCCL reductions"])
refused("all_reduce torch.uint32 refused", lambda: dist.all_reduce(data(rank, 4, torch.uint32).to(dev)),
        RuntimeError, ["hccl all_reduce", "reductions of", "uint32"])

# all_to_all of tensors of different sizes (alltoallv), 2-d rows.
inputs = [data(rank, 2 * (rank + 1 + 2 * j), torch.float32, salt=j).view(-1, 2).to(dev) for j in range(world)]
outputs = [torch.empty(rank * 2 + j + 1, 2, device=dev) for j in range(world)]
dist.all_to_all(outputs, inputs)
expect("all_to_all uneven sizes", outputs,
       [data(j, 2 * (j + 1 + 2 * rank), torch.float32, salt=rank).view(-1, 2) for j in range(world)])
for j in range(world):  # the sizes are the peers' sizes: the test above really was uneven
    assert outputs[j].shape[0] == j + 1 + 2 * rank

# The own rank as a peer.
refused("recv from own rank refused", lambda: dist.recv(torch.empty(4, device=dev), src=rank), ValueError,
        ["Invalid source rank", "should not be the same as the rank of the current process"])
refused("irecv from own rank refused", lambda: dist.irecv(torch.empty(4, device=dev), src=rank), ValueError,
        ["Invalid source rank"])
refused("isend to own rank refused", lambda: dist.isend(torch.ones(4, device=dev), dst=rank), ValueError,
        ["Invalid destination rank"])

# An all_reduce captured in an NPU graph: nothing is sent at capture, and each replay issues
# it again on the graph's static tensors, with the input data of that replay.
static_in = torch.zeros(16, device=dev)
graph = torch.npu.NPUGraph()
with torch.npu.graph(graph):
    static_out = static_in * 2
    dist.all_reduce(static_out)
for step in range(3):
    fresh = data(rank, 16, torch.float32, salt=100 + step)
    fresh = torch.where(fresh.isfinite(), fresh, 0.0).clamp(-1e30, 1e30)  # random bits: no inf/nan
    static_in.copy_(fresh.to(dev))
    graph.replay()
    eager = fresh.to(dev) * 2
    dist.all_reduce(eager)
    expect(f"graph replay {step} equals eager all_reduce", static_out, eager)
    if torch.equal(static_out.cpu(), (fresh * 2).cpu()):
        failures.append(f"graph replay {step}: the output is this rank's input alone")

report(checked=checked, failures=failures)
dist.destroy_process_group()
