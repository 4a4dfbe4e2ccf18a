"""Faults on an hccl group of 2 plain processes (no torchrun, so a dying rank does not take
the other down). Usage: faults.py <scenario>; each rank reports what it saw."""
from __future__ import annotations

import datetime
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

from harness import report, use_local_npu

scenario = sys.argv[1]
dev = use_local_npu()
timeout_s = float(os.environ.get("TEST_TIMEOUT_S", "30"))
kwargs = {} if os.environ.get("TEST_NO_TIMEOUT") else {"timeout": datetime.timedelta(seconds=timeout_s)}
if scenario == "board_disagreement":
    # Rank 1 checks collectives over the network, rank 0 uses the shared board (the default):
    # every rank must learn at once, not after the connect timeout.
    if os.environ["RANK"] == "1":
        os.environ["TORCH_HCCL_SHARED_BOARD"] = "0"
    start = time.monotonic()
    try:
        dist.init_process_group("hccl", **kwargs)
        report(raised=None)
    except Exception as e:  # noqa: BLE001  (the test inspects what was raised)
        report(raised=type(e).__name__, message=str(e), seconds=time.monotonic() - start)
    if os.environ["RANK"] == "0":
        time.sleep(2)  # rank 0 serves the store: the peer may still be reading it
    raise SystemExit(0)
dist.init_process_group("hccl", **kwargs)
rank = dist.get_rank()
warm = torch.ones(4, device=dev)
dist.all_reduce(warm)  # seq 1: everyone arrives
dist.broadcast(warm, 0)  # seq 2


def attempt(fn):
    start = time.monotonic()
    try:
        fn()
        return {"raised": None, "seconds": time.monotonic() - start}
    except Exception as e:  # noqa: BLE001  (the test inspects what was raised)
        return {"raised": type(e).__name__, "message": str(e), "seconds": time.monotonic() - start}


def still_usable():
    t = torch.full((3,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    return t.cpu().tolist() == [3.0, 3.0, 3.0]


MISMATCHES = ("numel", "dtype", "op", "root", "reduce_op", "split")


def mismatched(kind, g):
    if kind == "numel":
        dist.all_reduce(torch.ones(1024 if rank == 0 else 512, device=dev), group=g)
    elif kind == "dtype":
        dist.all_reduce(torch.ones(64, device=dev, dtype=torch.float32 if rank == 0 else torch.int32), group=g)
    elif kind == "op":
        t = torch.ones(8, device=dev)
        dist.all_reduce(t, group=g) if rank == 0 else dist.broadcast(t, 0, group=g)
    elif kind == "root":
        dist.broadcast(torch.ones(8, device=dev), src=rank, group=g)
    elif kind == "reduce_op":
        dist.all_reduce(torch.ones(8, device=dev), op=dist.ReduceOp.SUM if rank == 0 else dist.ReduceOp.MAX, group=g)
    elif kind == "split":
        # Rank 0 sends 1 row to rank 1, which expects 2 from it.
        ins = [1, 1] if rank == 0 else [2, 1]
        outs = [1, 2] if rank == 0 else [2, 1]
        dist.all_to_all_single(torch.empty(sum(outs), device=dev), torch.ones(sum(ins), device=dev), outs, ins,
                               group=g)


if scenario == "mismatches":
    # Each mismatch on a group of its own: every rank raises (the one that compares first
    # at once, the others when they see it gave up), nothing crashes, the group is then
    # unusable, and the other groups are not affected.
    seen = {}
    for kind in MISMATCHES:
        g = dist.new_group(backend="hccl")
        seen[kind] = attempt(lambda: mismatched(kind, g))
        seen[kind]["after"] = attempt(lambda: dist.all_reduce(torch.ones(2, device=dev), group=g)).get("message", "")
        seen[kind]["default_group_fine"] = still_usable()
    report(mismatches=seen)

elif scenario == "p2p":
    # A receive buffer smaller than the message: the receiver raises, naming both sides,
    # before the transport reads a byte (a short buffer would otherwise abort the process).
    if rank == 0:
        seen = attempt(lambda: dist.isend(torch.ones(1024, device=dev), dst=1).wait())
    else:
        seen = attempt(lambda: dist.irecv(torch.empty(512, device=dev), src=0).wait())
    report(**seen)

elif scenario == "late":
    # Rank 1 arrives late: rank 0 times out naming it, then rank 1 learns that rank 0 gave up.
    if rank == 1:
        time.sleep(float(os.environ.get("TEST_LATE_S", "6")))
    seen = attempt(lambda: dist.all_reduce(torch.ones(16, device=dev)))
    report(**seen)

elif scenario == "death":
    # Rank 1 dies in the middle of a large all_reduce; rank 0 must raise quickly, naming it.
    big = torch.ones(16 << 20, device=dev)
    if rank == 1:
        dist.all_reduce(big, async_op=True)
        time.sleep(0.05)
        os._exit(3)
    seen = attempt(lambda: [dist.all_reduce(big) for _ in range(20)])
    seen_after = attempt(lambda: dist.all_reduce(torch.ones(2, device=dev)))
    report(**seen, after=seen_after)

elif scenario == "exception":
    # Rank 1 ends on an uncaught exception, without destroy_process_group.
    if rank == 1:
        raise RuntimeError("the training step failed")
    time.sleep(0.5)
    seen = attempt(lambda: dist.all_reduce(torch.ones(4, device=dev)))
    report(**seen)

elif scenario == "death_before":
    # Rank 1 exits without joining the next collective.
    if rank == 1:
        os._exit(4)
    seen = attempt(lambda: dist.all_reduce(torch.ones(4, device=dev)))
    report(**seen)

elif scenario == "dump":
    # A run that is stuck but not timed out: the env var makes the waiting rank print the
    # report, and another thread gets the same report through the API.
    import torch_npu.distributed as nd

    if rank == 1:
        time.sleep(4)
        seen = attempt(lambda: dist.all_reduce(torch.ones(16, device=dev)))
        report(**seen)
    else:
        holder = {}

        def watchdog():
            time.sleep(2)
            holder["report"] = nd.collective_report()
            holder["status"] = nd.collective_status()

        thread = threading.Thread(target=watchdog)
        thread.start()
        seen = attempt(lambda: dist.all_reduce(torch.ones(16, device=dev)))
        thread.join()
        report(**seen, api_report=holder["report"], api_status=holder["status"])

elif scenario == "timeouts":
    backend = dist.group.WORLD._get_backend(dev)
    report(exec_s=backend.options._timeout.total_seconds(), connect_s=backend.transport.options._timeout.total_seconds())

dist.destroy_process_group()
