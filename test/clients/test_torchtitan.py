"""torchtitan, unchanged: its ``llama3_debugmodel`` configuration with its own Trainer on
local synthetic tokens (workers/torchtitan_train.py), on one npu and with FSDP on two.

The debug model's attention is ``flex_attention``, which torchtitan compiles with Inductor:
on npu that is the dense form (torch_npu's Inductor pass, see docs/compile.md). The
reference is the same run with every compiled function forced eager
(``torch.compiler.set_stance("force_eager")``): flex attention's eager composite, which equals
cpu's bit for bit. There is no cpu run to compare with: torch refuses flex attention's
backward on cpu ("FlexAttention does not support backward on CPU").

The worker runs torchtitan's "partial_dtensor" backend: its default, "spmd_types", needs an
FSDP newer than torch 2.13's (see the worker), on cpu with gloo as on npu. The two-rank run
is compared with the same two ranks forced eager, not with one npu: equal losses across
world sizes need the same initial weights (a torchtitan seed checkpoint), and DTensor's RNG
tracker draws each shard at an offset of its own, which is not a slice of the one-npu draw
(docs/runtime.md; CUDA's launch-grid increments behave alike).
"""
from __future__ import annotations

import os

import pytest

import sys

import launcher
from client_launch import SMALL_DEVICE, worker
from launcher import torchrun

pytest.importorskip("torchtitan")

STEPS = 4
GLOBAL_BATCH = 4
TIMEOUT = 420
# What torchtitan imports beyond its declared needs and the suite's: triton (on Ascend
# machines triton-ascend provides the module), tensorboard and datasets. They live in a
# directory of their own (scripts/setup_env.sh --test), on the path of these launches only,
# so that no other test's Inductor sees a triton.
SIDE_PACKAGES = os.path.join(sys.prefix, "torchtitan-deps")
# torch 2.13's FSDPParam, given dp_mesh_dims and a plain parameter (the "spmd_types" backend).
SPMD_PLAIN_PARAMETER_FAILURE = "When dp_mesh_dims is provided, all parameters must be DTensors"


def train(tmp_path, nproc: int, mode: str = "compiled"):
    path = os.pathsep.join(p for p in (launcher.WORKERS, launcher.REPO_ROOT, SIDE_PACKAGES,
                                       os.environ.get("PYTHONPATH", "")) if p)
    return torchrun(worker("torchtitan_train.py"), tmp_path, STEPS, GLOBAL_BATCH, mode, nproc=nproc, timeout=TIMEOUT,
                    env={**SMALL_DEVICE, "TORCH_NPU_MEMORY_CAPACITY_MB": "1024", "PYTHONPATH": path})


def check_trained(run, nproc: int) -> list[float]:
    assert run.returncode == 0, run.explain()
    losses = run.result(0, "losses")
    assert len(losses) == STEPS and all(0 < x < 20 for x in losses) and losses[-1] < losses[0], losses
    for rank in range(nproc):
        r = run.result(rank)
        assert r["device"] == f"npu:{rank}" and r["param_devices"] == ["npu"]
        assert r["losses"] == losses
    return losses


@pytest.fixture(scope="module")
def one_npu(tmp_path_factory):
    return train(tmp_path_factory.mktemp("titan1"), 1)


def test_llama3_debugmodel_trains_on_one_npu(one_npu, tmp_path):
    losses = check_trained(one_npu, 1)
    assert one_npu.result(0, "mode") == "compiled"
    eager = train(tmp_path, 1, "eager")
    # Inductor reassociates the attention's sums (and fuses the rest of the step): close, not equal.
    assert check_trained(eager, 1) == pytest.approx(losses, rel=1e-4)


@pytest.mark.skipif(os.environ.get("TORCH_NPU_CLIENTS_FULL") != "1",
                    reason="full client set only (scripts/run_client_libraries_full.sh): a minute of 2 ranks")
def test_llama3_debugmodel_trains_with_fsdp_on_two(tmp_path):
    run = train(tmp_path / "compiled", 2)
    assert SPMD_PLAIN_PARAMETER_FAILURE not in run.stderr, run.explain()
    losses = check_trained(run, 2)
    for rank in range(2):
        sharded = run.result(rank)
        assert sharded["fsdp"] and sharded["param_types"] == ["DTensor"], run.explain()
    eager = train(tmp_path / "eager", 2, "eager")
    assert check_trained(eager, 2) == pytest.approx(losses, rel=1e-4)
