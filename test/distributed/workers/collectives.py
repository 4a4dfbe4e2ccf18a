"""Every torch.distributed collective on npu tensors over hccl, compared bitwise with the same
call on cpu tensors over a gloo group of the same ranks (PyTorch's own CPU reference).

Usage: collectives.py [basic|all]. "basic" is init + all_reduce + broadcast.
"""
from __future__ import annotations

import datetime
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from harness import report, same, use_local_npu

dev = use_local_npu()
dist.init_process_group("hccl", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
checked: list[str] = []
failures: list[str] = []


def data(shape, dtype=torch.float32, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(1, 7, shape, generator=g, dtype=dtype)


def compare(name, on_npu, on_cpu):
    on_npu = on_npu if isinstance(on_npu, (list, tuple)) else [on_npu]
    on_cpu = on_cpu if isinstance(on_cpu, (list, tuple)) else [on_cpu]
    ok = len(on_npu) == len(on_cpu) and all(
        a.device.type == "npu" and same(a, b) for a, b in zip(on_npu, on_cpu)
    )
    checked.append(name)
    if not ok:
        failures.append(f"{name}: npu {[t.cpu().flatten()[:4].tolist() for t in on_npu]} vs cpu "
                        f"{[t.flatten()[:4].tolist() for t in on_cpu]}")


def both(name, fn):
    """Run fn(device, group) on npu/hccl and on cpu/gloo and compare the tensors it returns."""
    compare(name, fn(dev, None), fn(torch.device("cpu"), gloo))


def all_reduce_case(op, dtype):
    def fn(d, group):
        t = data((5, 7), dtype).to(d)
        dist.all_reduce(t, op=op, group=group)
        return t
    return fn


def basic():
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int64):
        both(f"all_reduce SUM {dtype}", all_reduce_case(dist.ReduceOp.SUM, dtype))
    for op in (dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX):
        both(f"all_reduce {op}", all_reduce_case(op, torch.float32))
    for op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR):
        both(f"all_reduce {op}", all_reduce_case(op, torch.int32))
    for root in range(world):
        def bcast(d, group, root=root):
            t = data((3, 4), salt=root).to(d)
            dist.broadcast(t, src=root, group=group)
            return t
        both(f"broadcast src={root}", bcast)


def reductions_gloo_lacks():
    # Gloo has neither AVG nor PREMUL_SUM: the reference is SUM then the same arithmetic on cpu.
    t = data((6,)).to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    ref = data((6,))
    dist.all_reduce(ref, group=gloo)
    compare("all_reduce AVG", t, ref / world)
    t = data((6,)).to(dev)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    ref = data((6,)) * 0.5
    dist.all_reduce(ref, group=gloo)
    compare("all_reduce PREMUL_SUM", t, ref)
    x = data((world * 4,))
    out = torch.empty(4, device=dev)
    dist.reduce_scatter_tensor(out, x.to(dev), op=dist.ReduceOp.AVG)
    ref = torch.empty(4)
    dist.reduce_scatter_tensor(ref, x, group=gloo)
    compare("reduce_scatter_tensor AVG", out, ref / world)
    x_npu = x.to(dev)
    dist.reduce_scatter_tensor(out, x_npu, op=dist._make_nccl_premul_sum(0.25))
    dist.reduce_scatter_tensor(ref, x * 0.25, group=gloo)
    compare("reduce_scatter_tensor PREMUL_SUM", out, ref)
    compare("reduce_scatter_tensor PREMUL_SUM leaves its input unchanged", x_npu, x)


def everything_else():
    def reduce_(d, group):
        t = data((4, 3)).to(d)
        dist.reduce(t, dst=world - 1, op=dist.ReduceOp.MAX, group=group)
        return t if rank == world - 1 else t[:0]
    both("reduce MAX", reduce_)

    def all_gather(d, group):
        out = [torch.empty(2, 3, device=d) for _ in range(world)]
        dist.all_gather(out, data((2, 3)).to(d), group=group)
        return out
    both("all_gather", all_gather)

    def all_gather_into_tensor(d, group):
        out = torch.empty(world * 2, 3, device=d)
        dist.all_gather_into_tensor(out, data((2, 3)).to(d), group=group)
        return out
    both("all_gather_into_tensor", all_gather_into_tensor)

    def reduce_scatter(d, group):
        out = torch.empty(3, device=d)
        dist.reduce_scatter(out, [data((3,), salt=i).to(d) for i in range(world)], group=group)
        return out
    both("reduce_scatter", reduce_scatter)

    def reduce_scatter_tensor(d, group):
        out = torch.empty(2, 5, device=d)
        dist.reduce_scatter_tensor(out, data((world * 2, 5)).to(d), group=group)
        return out
    both("reduce_scatter_tensor", reduce_scatter_tensor)

    def all_to_all_single(d, group):
        out = torch.empty(world * 3, device=d)
        dist.all_to_all_single(out, data((world * 3,)).to(d), group=group)
        return out
    both("all_to_all_single", all_to_all_single)

    # Uneven: rank r sends r+1+j rows to rank j.
    in_splits = [rank + 1 + j for j in range(world)]
    out_splits = [src + 1 + rank for src in range(world)]

    def all_to_all_uneven(d, group):
        out = torch.empty(sum(out_splits), 2, device=d)
        dist.all_to_all_single(out, data((sum(in_splits), 2)).to(d), out_splits, in_splits, group=group)
        return out
    both("all_to_all_single uneven splits", all_to_all_uneven)

    def all_to_all(d, group):
        outs = [torch.empty(2, device=d) for _ in range(world)]
        dist.all_to_all(outs, [data((2,), salt=j).to(d) for j in range(world)], group=group)
        return outs
    both("all_to_all", all_to_all)

    def gather(d, group):
        outs = [torch.empty(3, device=d) for _ in range(world)] if rank == 0 else None
        dist.gather(data((3,)).to(d), outs, dst=0, group=group)
        return outs if rank == 0 else [torch.empty(0, device=d)]
    both("gather", gather)

    def scatter(d, group):
        out = torch.empty(3, device=d)
        ins = [data((3,), salt=j).to(d) for j in range(world)] if rank == 0 else None
        dist.scatter(out, ins, src=0, group=group)
        return out
    both("scatter", scatter)

    def send_recv(d, group):
        peer = (rank + 1) % world
        prev = (rank - 1) % world
        got = torch.empty(4, device=d)
        if rank % 2 == 0:
            dist.send(data((4,)).to(d), dst=peer, group=group)
            dist.recv(got, src=prev, group=group)
        else:
            dist.recv(got, src=prev, group=group)
            dist.send(data((4,)).to(d), dst=peer, group=group)
        return got
    both("send/recv", send_recv)

    def isend_irecv(d, group):
        peer = (rank + 1) % world
        prev = (rank - 1) % world
        got = torch.empty(4, device=d)
        reqs = [dist.irecv(got, src=prev, group=group), dist.isend(data((4,)).to(d), dst=peer, group=group)]
        for r in reqs:
            r.wait()
        return got
    both("isend/irecv (receive posted first)", isend_irecv)

    def batch(d, group):
        peer = (rank + 1) % world
        prev = (rank - 1) % world
        got = torch.empty(5, device=d)
        ops = [dist.P2POp(dist.irecv, got, prev, group), dist.P2POp(dist.isend, data((5,)).to(d), peer, group)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return got
    both("batch_isend_irecv", batch)

    def backend_batch(d, group):
        # The C++ API's ProcessGroupHCCL::batch_isend_irecv (through the backend's binding),
        # one work over all operations, against gloo's per-operation works on cpu.
        peer = (rank + 1) % world
        prev = (rank - 1) % world
        got = torch.empty(6, device=d)
        payload = data((6,), salt=7).to(d)
        if group is None:
            backend = dist.group.WORLD._get_backend(d)
            backend.batch_isend_irecv(["irecv", "isend"], [got, payload], [prev, peer]).wait()
        else:
            ops = [dist.P2POp(dist.irecv, got, prev, group), dist.P2POp(dist.isend, payload, peer, group)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
        return got
    both("ProcessGroupHCCL.batch_isend_irecv", backend_batch)

    dist.barrier()
    checked.append("barrier")

    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "v": [rank] * 3})
    checked.append("all_gather_object")
    if objs != [{"rank": r, "v": [r] * 3} for r in range(world)]:
        failures.append(f"all_gather_object: {objs}")
    box = [{"from": 0}] if rank == 0 else [None]
    dist.broadcast_object_list(box, src=0)
    checked.append("broadcast_object_list")
    if box != [{"from": 0}]:
        failures.append(f"broadcast_object_list: {box}")
    got = [None]
    dist.scatter_object_list(got, [f"to {j}" for j in range(world)] if rank == 0 else None, src=0)
    checked.append("scatter_object_list")
    if got != [f"to {rank}"]:
        failures.append(f"scatter_object_list: {got}")
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(("r", rank), gathered, dst=0)
    checked.append("gather_object")
    if rank == 0 and gathered != [("r", r) for r in range(world)]:
        failures.append(f"gather_object: {gathered}")

    # Groups: the whole world again, and a group of one rank.
    sub = dist.new_group(list(range(world)))
    both("all_reduce on new_group", lambda d, g: (lambda t: (dist.all_reduce(t, group=sub if g is None else g), t)[1])(
        data((3,)).to(d)))
    solo = dist.new_group([world - 1])
    if rank == world - 1:
        t = data((3,)).to(dev)
        dist.all_reduce(t, group=solo)
        compare("all_reduce on a one-rank group", t, data((3,)))

    # Async work: wait(), is_completed(), the future's npu value.
    t = data((8,)).to(dev)
    work = dist.all_reduce(t, async_op=True)
    fut_value = work.get_future().wait()
    ok = work.wait() is True and work.is_completed() and fut_value[0].device.type == "npu"
    ref = data((8,))
    dist.all_reduce(ref, group=gloo)
    compare("async all_reduce + future", [t, fut_value[0]], [ref, ref])
    checked.append("work.is_completed after wait")
    if not ok:
        failures.append("async work: wait/is_completed/future value wrong")

    # A collective issued on a side stream is ordered there.
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        t = data((8,)).to(dev)
        dist.all_reduce(t)
        t2 = t * 2
    compare("all_reduce on a side stream", t2, ref * 2)

    # Functional collectives (what DTensor, FSDP2 and compiled graphs call).
    x = data((4, 2))
    y = funcol.all_reduce(x.to(dev), "sum", dist.group.WORLD)
    y = funcol.wait_tensor(y) if hasattr(funcol, "wait_tensor") else y
    ref = x.clone()
    dist.all_reduce(ref, group=gloo)
    compare("funcol.all_reduce", y, ref)
    y = funcol.all_gather_tensor(x.to(dev), 0, dist.group.WORLD)
    ref = torch.empty(world * 4, 2)
    dist.all_gather_into_tensor(ref, x, group=gloo)
    compare("funcol.all_gather_tensor", funcol.wait_tensor(y), ref)
    y = funcol.reduce_scatter_tensor(data((world * 2, 3)).to(dev), "sum", 0, dist.group.WORLD)
    ref = torch.empty(2, 3)
    dist.reduce_scatter_tensor(ref, data((world * 2, 3)), group=gloo)
    compare("funcol.reduce_scatter_tensor", funcol.wait_tensor(y), ref)
    y = funcol.all_to_all_single(data((world * 2,)).to(dev), None, None, dist.group.WORLD)
    ref = torch.empty(world * 2)
    dist.all_to_all_single(ref, data((world * 2,)), group=gloo)
    compare("funcol.all_to_all_single", funcol.wait_tensor(y), ref)

    # monitored_barrier is Gloo-only in PyTorch: it works on the gloo group, and the hccl
    # group raises PyTorch's own error, as NCCL does.
    dist.monitored_barrier(group=gloo, timeout=datetime.timedelta(seconds=30))
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))
        failures.append("monitored_barrier on hccl did not raise")
    except (ValueError, RuntimeError) as e:
        if "only implemented for GLOO" not in str(e):
            failures.append(f"monitored_barrier raised {e}")
    checked.append("monitored_barrier")


mode = sys.argv[1] if len(sys.argv) > 1 else "all"
basic()
if mode == "all":
    reductions_gloo_lacks()
    everything_else()
report(checked=checked, failures=failures, backend=str(dist.get_backend()),
       npu_backend=type(dist.group.WORLD._get_backend(dev)).__name__)
dist.destroy_process_group()
