"""The hccl backend on 2 processes under torchrun (3 and 4 too in the full set, see
launcher.py): every collective on npu tensors equals the same call on cpu tensors over gloo,
and ``import torch_npu`` only names the backend."""
from __future__ import annotations

import json

import pytest

from fresh_interpreter import run_python
from launcher import torchrun, world_sizes


def _check(launch, nranks=2):
    assert launch.returncode == 0, launch.explain()
    for rank in range(nranks):
        result = launch.result(rank)
        assert result["failures"] == [], result["failures"]
    return [launch.result(r) for r in range(nranks)]


def test_init_all_reduce_and_broadcast_on_npu():
    results = _check(torchrun("collectives.py", "basic", timeout=180))
    for r in results:
        assert r["backend"] == "hccl" and r["npu_backend"] == "ProcessGroupHCCL"
        assert "all_reduce SUM torch.bfloat16" in r["checked"] and "broadcast src=1" in r["checked"]


@pytest.mark.parametrize("nproc", world_sizes())
def test_every_collective_equals_gloo_on_cpu(nproc):
    launch = torchrun("collectives.py", "all", nproc=nproc, timeout=300, env={"TORCH_NPU_DEVICE_COUNT": str(nproc)})
    results = _check(launch, nproc)
    expected = {"all_to_all_single uneven splits", "batch_isend_irecv", "ProcessGroupHCCL.batch_isend_irecv",
                "funcol.reduce_scatter_tensor",
                "all_reduce AVG", "reduce_scatter_tensor PREMUL_SUM", "monitored_barrier",
                "all_reduce on a side stream", "async all_reduce + future", "scatter_object_list"}
    for r in results:
        assert expected <= set(r["checked"]), expected - set(r["checked"])


@pytest.mark.parametrize("nproc", world_sizes())
def test_edge_cases_of_dtypes_sizes_and_peers(nproc):
    # float8 and uint16/32/64 move as bytes; their reductions raise a clear first line; an
    # uneven all_to_all works; recv/send with the own rank is an argument error; the group
    # stays usable after every refused call; an all_reduce captured in an NPU graph is
    # issued again by each replay.
    launch = torchrun("edge_cases.py", nproc=nproc, timeout=240, env={"TORCH_NPU_DEVICE_COUNT": str(nproc)})
    results = _check(launch, nproc)
    for r in results:
        for dtype in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"):
            for op in ("broadcast", "all_gather", "all_to_all_single", "all_to_all", "scatter"):
                assert f"{op} torch.{dtype}" in r["checked"], (op, dtype)
        assert {"all_to_all uneven sizes", "recv from own rank refused", "all_reduce torch.float8_e5m2 refused",
                "all_reduce torch.uint32 refused"} <= set(r["checked"])
    assert "send/recv torch.float8_e4m3fn" in results[1]["checked"] and "gather torch.uint64" in results[0]["checked"]
    for r in results:  # an all_reduce captured in an NPU graph runs again at each replay
        assert {f"graph replay {step} equals eager all_reduce" for step in range(3)} <= set(r["checked"])


def test_import_torch_npu_registers_hccl_without_loading_the_backend():
    out = run_python(
        """
        import json, sys, torch, torch.distributed as dist
        import torch_npu
        report = {
            "loaded": sorted(m for m in sys.modules if m.startswith("torch_npu.distributed")),
            "bindings": hasattr(torch_npu._C, "_hccl"),
            "npu_default": dist.Backend.default_device_backend_map.get("npu"),
            "capability": dist.Backend.backend_capability.get("hccl"),
            "listed": "hccl" in dist.Backend.backend_list,
        }
        import torch_npu.distributed as nd
        report["available"] = nd.is_hccl_available()
        report["tensor_loaded"] = "torch_npu.distributed.tensor" in sys.modules
        print(json.dumps(report))
        """
    )
    report = json.loads(out.strip().splitlines()[-1])
    assert report == {"loaded": [], "bindings": False, "npu_default": "hccl", "capability": ["npu"],
                      "listed": True, "available": True, "tensor_loaded": False}
