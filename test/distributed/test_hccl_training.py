"""Training on npu over hccl under torchrun: DDP (buckets, no_sync, torch.compile, two
"nodes"), FSDP2 (fp32, mixed precision, compile), FSDP1, and sharded checkpoints. Each is
compared with the same run on cpu over gloo and/or with a single process."""
from __future__ import annotations

import pytest

from launcher import torchrun, torchrun_nodes, world_sizes


def _results(launch, nranks=2):
    assert launch.returncode == 0, launch.explain()
    return [launch.result(r) for r in range(nranks)]


def _check_ddp(results):
    for r in results:
        assert r["npu_equals_gloo_cpu"], r["max_diff_vs_gloo_cpu"]  # same kernels, same reduction order
        assert r["ranks_agree"]
    assert results[0]["close_to_single_process"], results[0]["max_diff_vs_single_process"]
    assert results[0]["weights_moved"]


@pytest.mark.parametrize("nproc", world_sizes())
def test_ddp_buckets_and_no_sync_match_gloo_and_a_single_process(nproc):
    launch = torchrun("ddp_train.py", "eager", 4, nproc=nproc, timeout=240, env={"TORCH_NPU_DEVICE_COUNT": str(nproc)})
    results = _results(launch, nproc)
    _check_ddp(results)
    assert len(results[0]["buckets"]) >= 2  # gradients reduced in several buckets


def test_compiled_ddp_matches_eager():
    results = _results(torchrun("ddp_train.py", "compile", 3, timeout=400))
    _check_ddp(results)
    for r in results:
        assert r["graphs"] >= 1 and r["kernels"] > 0  # Inductor compiled the npu model


def test_ddp_across_two_nodes_with_c10d_rendezvous():
    # Two torchrun agents joined by a c10d rendezvous on 127.0.0.1, one process each, each on
    # its own npu:0. TORCH_HCCL_SHARED_BOARD=0 makes the ranks check signatures over the
    # network, as ranks on separate hosts do.
    launch = torchrun_nodes("ddp_train.py", "no_device_ids", 3, timeout=300, env={"TORCH_HCCL_SHARED_BOARD": "0"})
    _check_ddp(_results(launch))


def test_fsdp2_fp32_mixed_precision_and_sharded_checkpoint(tmp_path):
    results = _results(torchrun("fsdp_train.py", "fsdp2", tmp_path / "ckpt", timeout=300))
    for r in results:
        assert r["params_are_npu_dtensors"] and r["local_shard_rows"] == [16, 16]
        assert r["fp32_close_to_single_process"], r["fp32_max_diff_vs_single_process"]
        assert r["mixed_max_diff_vs_gloo_cpu"] == 0.0 and r["mixed_master_dtype"] == "torch.float32"
        assert r["mixed_moved_from_fp32_run"]  # bf16 compute really ran
        assert r["loaded_shards_on_npu"] and r["resumed_equals_continued"]


def test_compiled_fsdp2_matches_eager():
    results = _results(torchrun("fsdp_train.py", "compile", timeout=400))
    for r in results:
        assert r["graphs"] >= 1 and r["kernels"] > 0
        assert r["compiled_max_diff_vs_eager"] < 1e-5 and r["fp32_close_to_single_process"]


def test_fsdp1_matches_a_single_process():
    for r in _results(torchrun("fsdp_train.py", "fsdp1", timeout=240)):
        assert r["fsdp1_close_to_single_process"], r["fsdp1_max_diff_vs_single_process"]
        assert r["flat_param_on_npu"]
