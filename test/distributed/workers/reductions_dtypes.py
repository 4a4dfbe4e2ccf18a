"""Reduction dtypes and coalescing regions of the hccl backend, on each rank of one launch.

int16 reductions (which the transport lacks and HCCL has) must give what int16 arithmetic
on cpu gives, overflow wrap-around included; uint16/32/64 reductions (in neither NCCL's nor
HCCL's dtype table) must be refused with a first line that names the dtype; collectives
issued inside ``torch.distributed._coalescing_manager`` must give the results they give
outside it.

Every rank computes every rank's data (seeded by rank), so the expected results come from
cpu tensors of this process. Usage: reductions_dtypes.py
"""
from __future__ import annotations

import datetime
import warnings

import torch
import torch.distributed as dist

from harness import report, use_local_npu

dev = use_local_npu()
dist.init_process_group("hccl", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
checked: list[str] = []
failures: list[str] = []
wrapped: list[str] = []  # int16 checks whose expected result really overflowed int16


def int16_data(owner, numel, salt=0, low=-32768, high=32768):
    g = torch.Generator().manual_seed(1000 * owner + salt)
    return torch.randint(low, high, (numel,), generator=g, dtype=torch.int64).to(torch.int16)


def fold(fn, tensors):
    """fn folded over the ranks' cpu tensors, in int16 arithmetic."""
    out = tensors[0].clone()
    for t in tensors[1:]:
        out = fn(out, t)
    return out


def int16_sum(tensors):
    return fold(torch.add, tensors)


def expect(name, got, want):
    got = got if isinstance(got, (list, tuple)) else [got]
    want = want if isinstance(want, (list, tuple)) else [want]
    checked.append(name)
    ok = len(got) == len(want) and all(
        g.device.type == "npu" and g.dtype == w.dtype and g.shape == w.shape and torch.equal(g.cpu(), w)
        for g, w in zip(got, want))
    if not ok:
        failures.append(f"{name}: {[g.cpu().reshape(-1)[:6].tolist() for g in got]} vs "
                        f"{[w.reshape(-1)[:6].tolist() for w in want]}")


def note_wrap(name, tensors):
    """Records that the int64 sum leaves int16's range: the check above tested wrap-around."""
    exact = sum(t.to(torch.int64) for t in tensors)
    if bool(((exact > 32767) | (exact < -32768)).any()):
        wrapped.append(name)


def refused(name, fn, first_line_words):
    checked.append(name)
    try:
        fn()
        failures.append(f"{name}: did not raise")
    except RuntimeError as e:
        first = str(e).splitlines()[0]
        if not all(w in first for w in first_line_words):
            failures.append(f"{name}: first line {first!r} lacks {first_line_words}")
    except Exception as e:  # noqa: BLE001
        failures.append(f"{name}: raised {type(e).__name__}: {str(e)[:300]}")
    t = torch.full((3,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    if t.cpu().tolist() != [float(world * (world + 1) // 2)] * 3:
        failures.append(f"{name}: the group gave {t.cpu().tolist()} afterwards")


# ---- int16 -------------------------------------------------------------------------------
n = 64
mine = [int16_data(r, n) for r in range(world)]
small = [int16_data(r, n, salt=7, low=-181, high=182) for r in range(world)]  # products of two stay in range
int16_cases = {
    "SUM": (dist.ReduceOp.SUM, mine, int16_sum(mine)),
    "PRODUCT": (dist.ReduceOp.PRODUCT, mine, fold(torch.mul, mine)),
    "PRODUCT small": (dist.ReduceOp.PRODUCT, small, fold(torch.mul, small)),
    "MIN": (dist.ReduceOp.MIN, mine, fold(torch.minimum, mine)),
    "MAX": (dist.ReduceOp.MAX, mine, fold(torch.maximum, mine)),
    "BXOR": (dist.ReduceOp.BXOR, mine, fold(torch.bitwise_xor, mine)),
    "BAND": (dist.ReduceOp.BAND, mine, fold(torch.bitwise_and, mine)),
    "AVG": (dist.ReduceOp.AVG, mine, torch.div(int16_sum(mine), world, rounding_mode="trunc")),
}
for label, (op, inputs, want) in int16_cases.items():
    t = inputs[rank].to(dev)
    dist.all_reduce(t, op=op)
    expect(f"int16 all_reduce {label}", t, want)
note_wrap("int16 all_reduce SUM", mine)

scalar = torch.tensor(30000 + rank, dtype=torch.int16, device=dev)
dist.all_reduce(scalar)
expect("int16 all_reduce 0-dim", scalar, int16_sum([torch.tensor(30000 + r, dtype=torch.int16) for r in range(world)]))

t = mine[rank].to(dev)
dist.reduce(t, dst=1)
expect("int16 reduce SUM", t, int16_sum(mine) if rank == 1 else mine[rank])

pieces = [[int16_data(r, 8, salt=10 + j) for j in range(world)] for r in range(world)]
out = torch.empty(8, dtype=torch.int16, device=dev)
dist.reduce_scatter(out, [p.to(dev) for p in pieces[rank]])
expect("int16 reduce_scatter SUM", out, int16_sum([pieces[r][rank] for r in range(world)]))
note_wrap("int16 reduce_scatter SUM", [pieces[r][rank] for r in range(world)])

flat = [int16_data(r, 8 * world, salt=20) for r in range(world)]
for label, op in (("SUM", dist.ReduceOp.SUM), ("AVG", dist.ReduceOp.AVG)):
    out = torch.empty(8, dtype=torch.int16, device=dev)
    dist.reduce_scatter_tensor(out, flat[rank].to(dev), op=op)
    want = int16_sum([f[8 * rank:8 * rank + 8] for f in flat])
    expect(f"int16 reduce_scatter_tensor {label}", out,
           want if label == "SUM" else torch.div(want, world, rounding_mode="trunc"))
note_wrap("int16 reduce_scatter_tensor SUM", [f[8 * rank:8 * rank + 8] for f in flat])

pair = [[int16_data(r, 5, salt=30), int16_data(r, 3, salt=31)] for r in range(world)]
ts = [p.to(dev) for p in pair[rank]]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # all_reduce_coalesced is deprecated
    dist.all_reduce_coalesced(ts)
expect("int16 all_reduce_coalesced", ts, [int16_sum([pair[r][i] for r in range(world)]) for i in range(2)])

# int16 next to int32 in one coalesced all_reduce: each keeps its dtype.
ts = [pair[rank][0].to(dev), torch.full((4,), rank + 1, dtype=torch.int32, device=dev)]
with dist._coalescing_manager(device=dev):
    for x in ts:
        dist.all_reduce(x)
expect("int16 and int32 coalesced", ts, [int16_sum([pair[r][0] for r in range(world)]),
                                         torch.full((4,), world * (world + 1) // 2, dtype=torch.int32)])

# ---- unsigned: refused, nothing posted --------------------------------------------------
words = ["neither NCCL nor HCCL", "torch.int64"]
for dtype in (torch.uint16, torch.uint32, torch.uint64):
    u = lambda k: torch.arange(k, dtype=torch.int64).to(dtype).to(dev)  # noqa: E731
    refused(f"all_reduce {dtype} refused", lambda: dist.all_reduce(u(4)), ["hccl all_reduce", str(dtype), *words])
    refused(f"reduce {dtype} refused", lambda: dist.reduce(u(4), dst=0), ["hccl reduce", str(dtype), *words])
    refused(f"reduce_scatter_tensor {dtype} refused",
            lambda: dist.reduce_scatter_tensor(u(2), u(2 * world)), ["reduce_scatter", str(dtype), *words])
    refused(f"reduce_scatter {dtype} refused",
            lambda: dist.reduce_scatter(u(2), [u(2) for _ in range(world)]), ["reduce_scatter", str(dtype), *words])

# ---- coalescing regions ------------------------------------------------------------------
def floats(owner, shape, salt):
    g = torch.Generator().manual_seed(500 * owner + salt)
    return torch.randint(-50, 50, shape, generator=g).to(torch.float32)


a = [floats(r, (6,), 1) for r in range(world)]
b = [floats(r, (2, 3), 2) for r in range(world)]
want_a, want_b = sum(a), sum(b)
plain_a, plain_b = a[rank].to(dev), b[rank].to(dev)
dist.all_reduce(plain_a)
dist.all_reduce(plain_b)
expect("all_reduce without coalescing", [plain_a, plain_b], [want_a, want_b])

t1, t2 = a[rank].to(dev), b[rank].to(dev)
with dist._coalescing_manager(None, dev, async_ops=True) as cm:
    dist.all_reduce(t1)
    dist.all_reduce(t2)
cm.wait()
expect("coalesced all_reduce async", [t1, t2], [plain_a.cpu(), plain_b.cpu()])
checked.append(f"coalesced works {len(cm.works)}")

t1, t2 = a[rank].to(dev), b[rank].to(dev)
with dist._coalescing_manager(None, dev):
    dist.all_reduce(t1, op=dist.ReduceOp.MAX)
    dist.all_reduce(t2, op=dist.ReduceOp.MAX)
expect("coalesced all_reduce sync MAX", [t1, t2], [fold(torch.maximum, a), fold(torch.maximum, b)])

t1, t2 = a[rank].to(dev), b[rank].to(dev)
with dist._coalescing_manager(async_ops=True) as cm:  # no device: the fast path alone
    dist.all_reduce(t1)
    dist.all_reduce(t2)
cm.wait()
expect("coalesced all_reduce without device", [t1, t2], [want_a, want_b])

ins = [[floats(r, (4,), 3), floats(r, (2,), 4)] for r in range(world)]
outs = [torch.empty(4 * world, device=dev), torch.empty(2 * world, device=dev)]
with dist._coalescing_manager(None, dev, async_ops=True) as cm:
    for o, i in zip(outs, ins[rank]):
        dist.all_gather_into_tensor(o, i.to(dev))
cm.wait()
expect("coalesced all_gather_into_tensor", outs, [torch.cat([ins[r][k] for r in range(world)]) for k in range(2)])

ins = [[floats(r, (4 * world,), 5), floats(r, (2 * world,), 6)] for r in range(world)]
outs = [torch.empty(4, device=dev), torch.empty(2, device=dev)]
with dist._coalescing_manager(None, dev, async_ops=True) as cm:
    for o, i in zip(outs, ins[rank]):
        dist.reduce_scatter_tensor(o, i.to(dev), op=dist.ReduceOp.AVG)
cm.wait()
expect("coalesced reduce_scatter_tensor AVG", outs,
       [sum(ins[r][k].view(world, -1)[rank] for r in range(world)) / world for k in range(2)])

# Collectives without a fast path run at once inside the region; the region's work covers them.
t = floats(rank, (5,), 7).to(dev)
gathered = [torch.empty(5, device=dev) for _ in range(world)]
with dist._coalescing_manager(None, dev, async_ops=True) as cm:
    dist.broadcast(t, src=1)
    dist.all_gather(gathered, floats(rank, (5,), 8).to(dev), async_op=True)
cm.wait()
expect("broadcast and all_gather in a coalescing region", [t, *gathered],
       [floats(1, (5,), 7), *[floats(r, (5,), 8) for r in range(world)]])
if not all(w.is_completed() for w in cm.works):
    failures.append("a coalesced work is not completed after wait()")

with dist._coalescing_manager(None, dev, async_ops=True) as cm:
    pass
checked.append(f"empty region works {len(cm.works)}")

t = floats(rank, (3,), 9).to(dev)
dist.all_reduce(t)
expect("all_reduce after the regions", t, sum(floats(r, (3,), 9) for r in range(world)))

report(checked=checked, failures=failures, wrapped=wrapped)
dist.destroy_process_group()
