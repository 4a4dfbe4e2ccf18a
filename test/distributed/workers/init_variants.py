"""The ways to create an hccl group, one after another in the same processes (each phase
destroys its group, so this also checks destroy-then-init)."""
from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist

import torch_npu.distributed as npu_dist
from harness import report, use_local_npu

dev = use_local_npu()


def npu_sum_ok():
    t = torch.full((3,), float(dist.get_rank() + 1), device=dev)
    dist.all_reduce(t)
    return t.device.type == "npu" and t.cpu().tolist() == [3.0] * 3


def cpu_sum():
    t = torch.full((3,), float(dist.get_rank() + 1))
    try:
        dist.all_reduce(t)
        return "ok" if t.tolist() == [3.0] * 3 else f"wrong {t.tolist()}"
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


phases = {}

# 1. No backend on a machine whose accelerator is npu: hccl for npu, as nccl for cuda.
dist.init_process_group()
phases["default"] = {"backend": str(dist.get_backend()), "config": dist.get_backend_config(),
                     "npu": npu_sum_ok(), "cpu": cpu_sum(), "accelerator": torch._C._get_accelerator().type}
dist.destroy_process_group()

# 2. Both devices.
dist.init_process_group("cpu:gloo,npu:hccl")
objs = [None] * dist.get_world_size()
dist.all_gather_object(objs, dist.get_rank())
dist.barrier()
phases["mixed"] = {"backend": str(dist.get_backend()), "npu": npu_sum_ok(), "cpu": cpu_sum(), "objects": objs}
dist.destroy_process_group()

# 3. Bound to the device (eager connection), plus the comm name the Ascend API exposes.
dist.init_process_group("hccl", device_id=dev)
backend = dist.group.WORLD._get_backend(torch.device("npu"))
phases["device_id"] = {"npu": npu_sum_ok(), "bound": str(dist.group.WORLD.bound_device_id),
                       "comm_name": backend.get_hccl_comm_name(dist.get_rank())}
dist.barrier()
dist.destroy_process_group()

# 4. A bad HCCL_EXEC_TIMEOUT is a clear error on every rank and leaves nothing behind.
os.environ["HCCL_EXEC_TIMEOUT"] = "soon"
try:
    dist.init_process_group("hccl")
    phases["bad_env"] = {"raised": None}
except Exception as e:  # noqa: BLE001
    phases["bad_env"] = {"raised": type(e).__name__, "message": str(e), "initialized": dist.is_initialized()}
del os.environ["HCCL_EXEC_TIMEOUT"]

# 5. Re-init after all of that, and the documented direct constructor.
dist.init_process_group("hccl", timeout=datetime.timedelta(seconds=45))
store = dist.PrefixStore("direct/", dist.distributed_c10d._get_default_store())
direct = npu_dist.ProcessGroupHCCL(store, dist.get_rank(), dist.get_world_size(), datetime.timedelta(seconds=20))
t = torch.full((2,), float(dist.get_rank() + 1), device=dev)
direct.allreduce([t]).wait()
phases["reinit"] = {"npu": npu_sum_ok(), "direct": t.cpu().tolist(), "direct_timeout": direct.options._timeout.total_seconds(),
                    "exec_timeout": dist.group.WORLD._get_backend(dev).options._timeout.total_seconds(),
                    "available": npu_dist.is_hccl_available()}
# ProcessGroup.set_timeout (what later torch releases call torch.distributed.set_timeout,
# and training loops use to shorten the timeout after the first step) reaches hccl's
# execution timeout, and collectives still run.
dist.group.WORLD.set_timeout(datetime.timedelta(seconds=30))
phases["reinit"]["set_timeout"] = dist.group.WORLD._get_backend(dev).options._timeout.total_seconds()
phases["reinit"]["npu_after_set_timeout"] = npu_sum_ok()
del direct
dist.destroy_process_group()

report(phases=phases)
