"""Real clients that pick the backend themselves: accelerate and the transformers Trainer
under torchrun on an npu machine choose hccl and npu:<local_rank>, and a tiny model trains."""
from __future__ import annotations

from launcher import torchrun


def test_accelerate_chooses_hccl_and_trains(tmp_path):
    launch = torchrun("hf_clients.py", "accelerate", tmp_path, timeout=240)
    assert launch.returncode == 0, launch.explain()
    for rank in (0, 1):
        r = launch.result(rank)
        assert r["backend"] == "hccl" and r["dist_backend"] == "hccl"
        assert r["distributed_type"] == "DistributedType.MULTI_NPU" and r["device"] == f"npu:{rank}"
        assert r["wrapped"] == "DistributedDataParallel" and r["params_on_npu"]
        assert r["moved"] and r["loss_fell"] and r["ranks_agree"]


def test_transformers_trainer_chooses_hccl_and_trains(tmp_path):
    launch = torchrun("hf_clients.py", "trainer", tmp_path, timeout=300)
    assert launch.returncode == 0, launch.explain()
    results = [launch.result(r) for r in (0, 1)]
    for rank, r in enumerate(results):
        assert r["device"] == f"npu:{rank}" and r["parallel_mode"] == "ParallelMode.DISTRIBUTED"
        assert r["dist_backend"] == "hccl" and r["wrapped"] == "DistributedDataParallel"
        assert r["params_on_npu"] and r["moved"] and r["ranks_agree"]
        assert len(r["logged_losses"]) == 4 and all(0 < x < 10 for x in r["logged_losses"])
    assert results[0]["train_loss"] == results[1]["train_loss"]
