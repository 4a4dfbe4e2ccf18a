"""Ways to create an hccl group, in sequence in the same 2 processes (so destroy-then-init
is exercised after every phase): backend=None on an npu machine, "cpu:gloo,npu:hccl",
device_id=, a bad timeout variable, the documented ProcessGroupHCCL constructor, and
ProcessGroup.set_timeout on the group."""
from __future__ import annotations

from launcher import torchrun


def test_group_creation_variants():
    launch = torchrun("init_variants.py", timeout=240)
    assert launch.returncode == 0, launch.explain()
    for rank in (0, 1):
        p = launch.result(rank, "phases")
        # As with nccl on cuda: the accelerator's backend only, cpu tensors have none.
        assert p["default"] == {"backend": "undefined", "config": "npu:hccl", "npu": True,
                                "cpu": "RuntimeError: No backend type associated with device type cpu",
                                "accelerator": "npu"}
        assert p["mixed"] == {"backend": "cpu:gloo,npu:hccl", "npu": True, "cpu": "ok", "objects": [0, 1]}
        assert p["device_id"]["npu"] and p["device_id"]["bound"] == f"npu:{rank}"
        assert p["device_id"]["comm_name"].startswith("hccl_")
        assert p["bad_env"]["raised"] == "ValueError" and "HCCL_EXEC_TIMEOUT='soon'" in p["bad_env"]["message"]
        assert p["bad_env"]["initialized"] is False
        assert p["reinit"] == {"npu": True, "direct": [3.0, 3.0], "direct_timeout": 20.0, "exec_timeout": 45.0,
                               "available": True, "set_timeout": 30.0, "npu_after_set_timeout": True}
