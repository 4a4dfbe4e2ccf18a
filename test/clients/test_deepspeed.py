"""DeepSpeed, unchanged, on 2 npu ranks over hccl: ZeRO stages 1, 2 and 3 with DeepSpeed's
activation checkpointing, in fp32 and bf16, with the toolkit environment and nothing else
set by hand. Each configuration equals the same configuration on one process that
accumulates gradients over 2 micro-batches (the same global batch): every loss and every
fp32 master weight bit for bit, gradient clipping active at every step (the clipping norm
itself to 1e-14 relative, see below).

The comparison with DeepSpeed's own cpu accelerator (``DS_ACCELERATOR=cpu``) is in
scripts/run_client_libraries_full.sh, not here: that accelerator JIT-compiles its
``deepspeed_shm_comm`` extension at start-up, about two minutes of both cores, which is
half of the time the whole client set may take in CI.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from client_launch import SMALL_DEVICE, worker
from launcher import torchrun

pytest.importorskip("deepspeed")

STAGES = (1, 2, 3)
DTYPES = ("fp32", "bf16")
CONFIGS = [f"zero{s}_{d}" for s in STAGES for d in DTYPES]
ARGS = (",".join(map(str, STAGES)), ",".join(DTYPES))
TIMEOUT = 420


def launch(nproc: int, env: dict):
    run = torchrun(worker("deepspeed_train.py"), *ARGS, nproc=nproc, timeout=TIMEOUT, env=env)
    assert run.returncode == 0, run.explain()
    return run


def samples_in_order(run, config: str, world: int) -> list[float]:
    """Every micro-batch loss of a run, in the order of the global batch's samples."""
    per_rank = [run.result(r, config)["losses"] for r in range(world)]
    per_step = len(per_rank[0]) // 3
    return [per_rank[r][s * per_step + m] for s in range(3) for r in range(world) for m in range(per_step)]


@pytest.fixture(scope="module")
def runs(toolkit_env):
    env = {**toolkit_env, **SMALL_DEVICE, "DS_ACCELERATOR": None}
    return launch(2, env), launch(1, env)


def test_deepspeed_picks_npu_and_hccl(runs):
    two, one = runs
    for run, world in ((two, 2), (one, 1)):
        for rank in range(world):
            r = run.result(rank)
            assert (r["accelerator"], r["backend"], r["dist_backend"], r["world"]) == ("npu", "hccl", "hccl", world)


@pytest.mark.parametrize("config", CONFIGS)
def test_two_ranks_equal_one_process(runs, config):
    two, one = runs
    a0, a1, b = two.result(0, config), two.result(1, config), one.result(0, config)
    assert a0["param_device_types"] == ["npu"] and b["param_device_types"] == ["npu"]
    # Activation checkpointing recomputed the block in every backward.
    assert a0["block_forward_calls"] == 2 * a0["micro_batches"]
    assert b["block_forward_calls"] == 2 * b["micro_batches"]
    # Clipping (at 0.1) scaled every update, so its norm took part in the result.
    assert min(a0["grad_norms"]) > 0.1
    # The global gradient norm is a float64 sum of the partitions' squares, added in another
    # order on 2 ranks than on one under ZeRO-3: equal to the last bits of a double only.
    for x, y in zip(a0["grad_norms"], b["grad_norms"], strict=True):
        assert x == pytest.approx(y, rel=1e-14, abs=0)
    assert samples_in_order(two, config, 2) == samples_in_order(one, config, 1)
    assert a0["weights"] == a1["weights"] == b["weights"]


def test_ds_report_shows_the_simulated_cann_version(toolkit_env):
    from torch_npu.npu.cann_version import get_cann_version

    env = {**os.environ, **toolkit_env}
    env.pop("DS_ACCELERATOR", None)
    ds_report = os.path.join(os.path.dirname(sys.executable), "ds_report")
    out = subprocess.run([ds_report], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    line = next(l for l in out.stdout.splitlines() if l.startswith("ascend_cann version"))
    assert line.rstrip().endswith(get_cann_version()), line
    assert "torch_npu version" in out.stdout


@pytest.mark.skipif(os.environ.get("TORCH_NPU_CLIENTS_FULL") != "1",
                    reason="full client set only (scripts/run_client_libraries_full.sh): the cpu "
                           "accelerator compiles deepspeed_shm_comm first, about two minutes of CPU")
def test_two_npu_ranks_equal_deepspeeds_cpu_accelerator(runs, toolkit_env, tmp_path):
    # A build directory of this run's own: a compile killed by the timeout leaves a lock
    # file behind, and a later run waiting on it would hang.
    env = {**toolkit_env, **SMALL_DEVICE, "DS_ACCELERATOR": "cpu", "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    cpu = torchrun(worker("deepspeed_train.py"), *ARGS, nproc=2, timeout=900, env=env)
    assert cpu.returncode == 0, cpu.explain()
    npu = runs[0]
    assert cpu.result(0)["accelerator"] == "cpu"
    for config in CONFIGS:
        for rank in (0, 1):
            c, n = cpu.result(rank, config), npu.result(rank, config)
            assert c["param_device_types"] == ["cpu"]
            assert (c["losses"], c["grad_norms"], c["weights"]) == (n["losses"], n["grad_norms"], n["weights"]), config
