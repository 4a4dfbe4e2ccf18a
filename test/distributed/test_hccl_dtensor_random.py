"""DTensor's offset-based RNG (``_PhiloxState`` over ``torch.npu.get_rng_state``) on 2 ranks
over hccl: a sharded DTensor initialised with ``torch.nn.init`` holds, on each rank, what a
plain npu call draws at the offset DTensor assigns that rank's shard; replicas are equal;
the offset then moves past the whole tensor, as on CUDA."""
from __future__ import annotations

from launcher import torchrun


def test_dtensor_random_init_uses_the_npu_offsets():
    launch = torchrun("dtensor_random.py", nproc=2, timeout=240,
                      env={"TORCH_NPU_MEMORY_CAPACITY_MB": "256"})
    assert launch.returncode == 0, launch.explain()
    reports = [launch.result(rank) for rank in range(2)]
    for r in reports:
        assert r["state_bytes"] == 16
        assert r["init_shard_matches_plain_call"]
        assert r["init_offset_after"] == 48  # the whole 8 x 6 tensor, as DTensor moves it
        assert r["init_shards_differ"]
        assert r["normal_col_shard_matches_plain_call"]
        assert r["normal_offset_after"] == 40
        assert r["replicas_equal"] and r["replica_matches_plain_call"]
        assert r["factory_rows_distinct"]
    assert reports[0]["replica_values"] == reports[1]["replica_values"]
