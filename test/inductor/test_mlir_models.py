"""The ``mlir`` npu backend on real models: correct against cpu eager, no C++ fallbacks.

Every case compiles on npu with ``npu_backend="mlir"`` and checks the outputs, the
gradients and the fallback counter of ``torch_npu.compiler.inductor.mlir`` (target:
every fused kernel emitted as MLIR). Forward+backward of an MLP, a small CNN and a
transformer block, static and dynamic shapes, and a full training step.
"""
from __future__ import annotations


import pytest
import torch

import torch_npu  # noqa: E402  (a missing package is a failure, not a skip)
pytest.importorskip("torch_mlir")

from inductor_models import (  # noqa: E402
    MODEL_CASES,
    NPU,
    assert_close_to_cpu,
    assert_forward_backward_matches_cpu,
    mlp_with_adam_on_both,
)

from torch_npu.compiler.inductor import mlir as mlir_backend  # noqa: E402

# The FX graph cache is off so that every test really generates (and counts) its kernels.
MLIR_OPTIONS = {
    "npu_backend": "mlir",
    "fx_graph_cache": False,
}


def compile_mlir(fn, **kwargs):
    return torch.compile(fn, backend="inductor", options=MLIR_OPTIONS, **kwargs)


def assert_all_kernels_mlir():
    stats = mlir_backend.fallback_stats()
    assert stats["fallbacks"] == 0, stats["reasons"]
    assert stats["mlir_kernels"] > 0, stats


@pytest.fixture(autouse=True)
def _fresh_counters():
    mlir_backend.reset_fallback_stats()
    yield


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("make_model, make_input", MODEL_CASES)
def test_forward_backward_matches_cpu_without_fallback(make_model, make_input, dynamic):
    assert_forward_backward_matches_cpu(
        make_model,
        make_input,
        lambda npu_model: compile_mlir(npu_model, dynamic=dynamic),
        grad_rtol=1e-3,
    )
    assert_all_kernels_mlir()


def test_training_step_with_optimizer_matches_cpu_without_fallback():
    cpu_model, npu_model, cpu_opt, npu_opt = mlp_with_adam_on_both()
    x = torch.randn(16, 32)

    def step(model, opt, inp):
        opt.zero_grad(set_to_none=True)
        loss = model(inp).square().mean()
        loss.backward()
        opt.step()
        return loss

    compiled_step = compile_mlir(step)
    for _ in range(3):
        loss_cpu = step(cpu_model, cpu_opt, x)
        loss_npu = compiled_step(npu_model, npu_opt, x.to(NPU))
        assert_close_to_cpu(loss_npu, loss_cpu)
    assert_close_to_cpu(list(npu_model.parameters()), list(cpu_model.parameters()))
    assert_all_kernels_mlir()


def test_kernels_run_on_the_tensors_own_memory():
    """In-place updates land in the npu tensor itself (no copy in or out)."""
    x = torch.randn(1000).to(NPU)
    ptr = x.data_ptr()
    expected = x.cpu() * 2 + 1

    @compile_mlir
    def scale_(t):
        t.mul_(2).add_(1)

    scale_(x)
    assert x.data_ptr() == ptr
    assert_close_to_cpu(x, expected)
    assert_all_kernels_mlir()
