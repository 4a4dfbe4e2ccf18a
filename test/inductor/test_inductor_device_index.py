"""Compiled npu code runs on its inputs' device, not on the current one.

Inductor emits device guards only for GPU device types and wrote npu allocations as
``device='npu'``, so a graph of ``npu:1`` tensors produced ``npu:0`` outputs and the
model failed in its next op. Every backend is run here on ``npu:1`` while ``npu:0`` is
current: outputs (and gradients) on ``npu:1``, values equal to cpu, current device
unchanged.
"""
from __future__ import annotations

import copy

import pytest
import torch

import torch_npu  # noqa: E402  (a missing package is a failure, not a skip)

from inductor_models import MLP  # noqa: E402

INDUCTOR_BACKENDS = [
    pytest.param({"backend": "inductor", "options": {"npu_backend": "default"}}, id="inductor_default"),
    pytest.param({"backend": "inductor", "options": {"npu_backend": "mlir"}}, id="inductor_mlir"),
]
ALL_BACKENDS = [
    *INDUCTOR_BACKENDS,
    pytest.param({"backend": "npu"}, id="npu"),
    pytest.param({"backend": "npugraph_ex"}, id="npugraph_ex"),
    pytest.param({"backend": "npugraphs"}, id="npugraphs"),
]


def _skip_without_mlir(kwargs):
    if kwargs.get("options", {}).get("npu_backend") == "mlir":
        pytest.importorskip("torch_mlir")


@pytest.mark.parametrize("compile_kwargs", ALL_BACKENDS)
def test_pointwise_output_on_input_device(two_devices, compile_kwargs):
    _skip_without_mlir(compile_kwargs)
    npu0, npu1 = two_devices
    torch.npu.set_device(npu0)
    fn = torch.compile(lambda x: (x.sin() * 2, torch.arange(4, device=x.device) + x[0]), **compile_kwargs)
    x = torch.randn(4)
    for _ in range(3):  # graph backends: warm-up, record, replay
        out = fn(x.to(npu1))
    assert [o.device for o in out] == [npu1, npu1]
    assert torch.npu.current_device() == 0
    torch.testing.assert_close(out[0].cpu(), x.sin() * 2)
    torch.testing.assert_close(out[1].cpu(), torch.arange(4) + x[0])


@pytest.mark.parametrize("compile_kwargs", ALL_BACKENDS)
def test_training_step_on_second_device_matches_cpu(two_devices, compile_kwargs):
    _skip_without_mlir(compile_kwargs)
    npu0, npu1 = two_devices
    torch.npu.set_device(npu0)
    torch.manual_seed(0)
    cpu_model = MLP()
    npu_model = copy.deepcopy(cpu_model).to(npu1)
    compiled = torch.compile(npu_model, **compile_kwargs)
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    npu_opt = torch.optim.SGD(npu_model.parameters(), lr=0.1)
    for _ in range(3):
        torch_npu.npu.mark_step_begin()
        x = torch.randn(16, 32)
        for model, opt, inp in ((cpu_model, cpu_opt, x), (compiled, npu_opt, x.to(npu1))):
            opt.zero_grad(set_to_none=True)
            out = model(inp)
            out.square().mean().backward()
            opt.step()
        assert out.device == npu1
    assert torch.npu.current_device() == 0
    for p_npu, p_cpu in zip(npu_model.parameters(), cpu_model.parameters()):
        assert p_npu.device == npu1 and p_npu.grad.device == npu1
        torch.testing.assert_close(p_npu.cpu(), p_cpu, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("compile_kwargs", INDUCTOR_BACKENDS)
def test_graph_moving_data_between_devices(two_devices, compile_kwargs):
    _skip_without_mlir(compile_kwargs)
    npu0, npu1 = two_devices
    fn = torch.compile(lambda x: (x.cos().to(npu1) * 3, x + 1), **compile_kwargs)
    x = torch.randn(8)
    on1, on0 = fn(x.to(npu0))
    assert on1.device == npu1 and on0.device == npu0
    torch.testing.assert_close(on1.cpu(), x.cos() * 3)
    torch.testing.assert_close(on0.cpu(), x + 1)


def test_buffers_are_allocated_through_the_runtime_entry_point_on_their_device(two_devices):
    from torch._inductor.utils import run_and_get_code

    npu0, npu1 = two_devices
    torch.npu.set_device(npu0)
    torch._dynamo.reset()
    weight = torch.randn(8, 8)
    x = torch.randn(4, 8)
    fn = torch.compile(lambda a, w: torch.sin(a @ w) @ w, options={"npu_backend": "default"})
    out, codes = run_and_get_code(fn, x.to(npu1), weight.to(npu1))
    code = "\n".join(codes)
    assert "empty_strided_npu(" in code and "= empty_strided(" not in code, code
    assert ", torch.float32, 1)" in code  # the buffers' own device
    # The body runs under the runtime's C device guard of the graph's device.
    assert "with npu_device_guard(1):" in code, code
    assert out.device == npu1
    torch.testing.assert_close(out.cpu(), torch.sin(x @ weight) @ weight)
