"""diffusers, unchanged, on its npu path (see workers/diffusers_models.py for what runs):
a tiny UNet2DConditionModel with AttnProcessorNPU and one DDIM step, a tiny Flux
transformer on the ``_native_npu`` attention backend and a tiny SD3 transformer with
RMSNorm on queries and keys, in bfloat16.

What is compared: the npu outputs against the same diffusers code on cpu tensors in the
same process, where diffusers takes the same npu path. Of the three operators it calls,
``npu_fusion_attention`` runs its cpu kernel; ``npu_geglu`` and ``npu_rms_norm`` have
none (as on Ascend: a GEGLU model on cpu fails while torch_npu is installed, asserted
here), so the cpu run uses each operator's documented formula written in plain ATen ops
in the worker. Every output is bit-equal.
"""
from __future__ import annotations

import pytest

from client_launch import SMALL_DEVICE, worker
from launcher import spawn_ranks

pytest.importorskip("diffusers")


@pytest.fixture(scope="module")
def result():
    run = spawn_ranks(worker("diffusers_models.py"), nproc=1, timeout=400, env=SMALL_DEVICE)
    assert run.returncode == 0, run.explain()
    return run.result(0)


def test_geglu_model_on_cpu_fails_without_a_cpu_kernel(result):
    # diffusers checks only that torch_npu is installed, not the tensors' device.
    assert result["cpu_without_reference"] == "Could not run 'npu::npu_geglu' with arguments from the 'CPU' backend"


def test_unet_denoising_step_equals_cpu(result):
    assert result["unet_processors"] == ["AttnProcessorNPU"]
    assert result["unet_touched"]["ops"] == {"npu::npu_fusion_attention": 8, "npu::npu_geglu": 4}
    for key in ("unet_noise", "unet_step"):
        r = result[key]
        assert r["dtype"] == "torch.bfloat16" and r["finite"] and r["shape"] == [2, 4, 8, 8]
        assert r["equal"], r


@pytest.mark.parametrize("model, ops", [("flux", {"npu::npu_fusion_attention": 2}),
                                        ("sd3", {"npu::npu_rms_norm": 4})])
def test_transformer_equals_cpu(result, model, ops):
    assert result[f"{model}_touched"]["ops"] == ops
    r = result[model]
    assert r["dtype"] == "torch.bfloat16" and r["finite"]
    assert r["equal"], r
