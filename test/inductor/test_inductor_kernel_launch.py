"""npu kernels are launched through the runtime, so NPU graph capture records them.

Also checks that the npu config module takes part in the FX-graph cache key: the same
graph compiled with ``launch_through_runtime`` off must produce different code, not a
cache hit of the earlier artifact.
"""
from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401  (registers the npu device and the compile trigger)
from torch._inductor.utils import run_and_get_code

LAUNCH = "npu_launch_host_kernel("


def fn(t):
    return torch.softmax(t.sin() * 2 + 1, dim=-1)


def test_wrapper_launches_kernels_through_the_runtime():
    from torch_npu.compiler.inductor import config as npu_config

    x = torch.randn(8, 16)
    compiled = torch.compile(fn, options={"npu_backend": "default"})
    out, codes = run_and_get_code(compiled, x.npu())
    torch.testing.assert_close(out.cpu(), fn(x))
    assert any(LAUNCH in code for code in codes), codes

    with npu_config.patch(launch_through_runtime=False):
        compiled = torch.compile(fn, options={"npu_backend": "default"})
        out, codes = run_and_get_code(compiled, x.npu())
    torch.testing.assert_close(out.cpu(), fn(x))
    assert codes and not any(LAUNCH in code for code in codes), codes


def test_compiled_kernels_are_recorded_by_graph_capture():
    if not hasattr(torch.npu, "NPUGraph"):
        pytest.skip("runtime without NPU graphs")
    compiled = torch.compile(fn, options={"npu_backend": "default"})
    static_in = torch.randn(8, 16).npu()
    compiled(static_in)  # compile and warm up outside the capture

    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        static_out = compiled(static_in)

    for _ in range(2):
        fresh = torch.randn(8, 16)
        static_in.copy_(fresh.npu())
        graph.replay()
        torch.npu.synchronize()
        torch.testing.assert_close(static_out.cpu(), fn(fresh))


def test_control_flow_subgraph_kernels_are_launched_through_the_runtime():
    def cond_fn(pred, t):
        return torch.cond(pred, lambda u: u.sin() * 2, lambda u: u.cos() + 1, (t,))

    x = torch.randn(8)
    compiled = torch.compile(cond_fn, options={"npu_backend": "default"})
    for pred in (True, False):
        out, codes = run_and_get_code(compiled, torch.tensor(pred).npu(), x.npu())
        torch.testing.assert_close(out.cpu(), cond_fn(torch.tensor(pred), x))
        # One kernel per branch, both in subgraph wrappers.
        assert sum(code.count(LAUNCH) for code in codes) == 2, codes
