"""DeviceMesh, DTensor and tensor parallelism on npu over hccl (4 processes: meshes (4,) and
(2, 2)), compared with the same computation on plain tensors in one process."""
from __future__ import annotations

from launcher import torchrun


def test_device_mesh_dtensor_and_tensor_parallel():
    launch = torchrun("dtensor_tp.py", nproc=4, timeout=300, env={"TORCH_NPU_DEVICE_COUNT": "4"})
    assert launch.returncode == 0, launch.explain()
    for rank in range(4):
        r = launch.result(rank)
        assert r["mesh_device"] == "npu" and r["local_shard"] == [2, 6] and r["local_on_npu"]
        for key in ("roundtrip", "redistribute", "matmul", "sum", "shard_to_shard", "distribute_module",
                    "mesh2_roundtrip", "mesh2_matmul"):
            assert r[key], key
        assert r["mesh2_shape"] == [2, 2] and r["mesh2_sub"] == [2, 2]
        assert r["tp_1d"] == {"output": True, "grads": True, "step": True, "w1_local": [4, 6]}
        assert r["tp_2d"] == {"output": True, "grads": True, "step": True, "w1_local": [8, 6]}
