"""The ``default`` npu backend (Inductor's C++ kernels on npu memory) on real models.

Each case compiles on npu and compares with cpu eager on the same weights and inputs:
forward and backward of an MLP, a small CNN and a transformer block, a full training step
with an optimizer, dynamic shapes, max-autotune, and graphs mixing npu and cpu tensors.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch_npu  # noqa: F401  (registers the npu device)

from inductor_models import (
    MLP,
    MODEL_CASES,
    NPU,
    TransformerBlock,
    assert_close_to_cpu,
    assert_forward_backward_matches_cpu,
    forward_backward,
    mlp_with_adam_on_both,
)


def compile_default(fn, **kwargs):
    return torch.compile(fn, backend="inductor", options={"npu_backend": "default"}, **kwargs)


@pytest.mark.parametrize("make_model, make_input", MODEL_CASES)
def test_forward_backward_matches_cpu(make_model, make_input):
    assert_forward_backward_matches_cpu(make_model, make_input, compile_default)


def test_training_step_with_optimizer_matches_cpu():
    cpu_model, npu_model, cpu_opt, npu_opt = mlp_with_adam_on_both()
    compiled_model = compile_default(npu_model)

    @compile_default
    def npu_optimizer_step():
        npu_opt.step()

    batches = [(torch.randn(16, 32), torch.randn(16, 8)) for _ in range(3)]
    for x, y in batches:
        cpu_opt.zero_grad()
        torch.nn.functional.mse_loss(cpu_model(x), y).backward()
        cpu_opt.step()

        npu_opt.zero_grad()
        loss = torch.nn.functional.mse_loss(compiled_model(x.to(NPU)), y.to(NPU))
        loss.backward()
        npu_optimizer_step()

    assert_close_to_cpu(list(npu_model.parameters()), list(cpu_model.parameters()), atol=1e-4)


def test_dynamic_shapes_match_cpu():
    torch.manual_seed(0)
    cpu_model = MLP()
    npu_model = copy.deepcopy(cpu_model).to(NPU)
    compiled = compile_default(npu_model, dynamic=True)
    for batch in (5, 11, 17):
        x = torch.randn(batch, 32)
        out_cpu, grads_cpu = forward_backward(cpu_model, x)
        out_npu, grads_npu = forward_backward(compiled, x.to(NPU))
        assert out_npu.shape == (batch, 8)
        assert_close_to_cpu(out_npu, out_cpu)
        assert_close_to_cpu(grads_npu, grads_cpu)


def test_max_autotune_no_cudagraphs_matches_cpu():
    torch.manual_seed(0)
    cpu_model = TransformerBlock()
    npu_model = copy.deepcopy(cpu_model).to(NPU)
    # torch.compile takes mode or options, not both: npu_backend comes from the config.
    compiled = torch.compile(npu_model, mode="max-autotune-no-cudagraphs")
    x = torch.randn(2, 8, 32)
    out_cpu, grads_cpu = forward_backward(cpu_model, x)
    out_npu, grads_npu = forward_backward(compiled, x.to(NPU))
    assert_close_to_cpu(out_npu, out_cpu)
    assert_close_to_cpu(grads_npu, grads_cpu)


def test_graph_mixing_npu_and_cpu_tensors():
    def fn(a_npu, b_cpu):
        c = torch.sin(a_npu) * 2 + 1  # npu kernel
        d = torch.cos(b_cpu).sum(dim=0)  # cpu kernel
        # Explicit transfers in both directions inside the graph.
        return c + d.to(a_npu.device), (c.to("cpu") * b_cpu).relu()

    a, b = torch.randn(8, 4), torch.randn(8, 4)
    out_npu, out_cpu = compile_default(fn)(a.to(NPU), b)
    ref_npu, ref_cpu = fn(a, b)
    assert_close_to_cpu(out_npu, ref_npu)
    assert out_cpu.device.type == "cpu"
    torch.testing.assert_close(out_cpu, ref_cpu)


def test_mixing_devices_in_one_op_fails_clearly():
    def fn(a_npu, b_cpu):
        return a_npu + b_cpu

    with pytest.raises(Exception, match="(?i)device"):
        compile_default(fn)(torch.randn(4, 4).to(NPU), torch.randn(4, 4))
