"""npu graphs get cpu's lowering choices where Inductor decides by device type.

Inductor generates an atomic-add scatter for non-cpu devices (cpu runs the eager kernel),
and torch 2.13's C++ code generator miscompiles it once tiled: torchvision's max-pool
backward (a scatter after decomposition) gave wrong gradients and wrote out of bounds.
Arg-reductions over all dimensions of a permuted tensor computed logical indices only
for cpu. Both are compared with cpu eager on the npu backends. The norms' small
``var_mean``s take cpu's two passes instead of a Welford reduction: bit-equal to cpu's
compiled results.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: E402  (a missing package is a failure, not a skip)

from fresh_interpreter import run_python  # noqa: E402
from inductor_models import NPU, assert_close_to_cpu  # noqa: E402

BACKENDS = ["default", "mlir"]


def _compile(fn, npu_backend):
    if npu_backend == "mlir":
        pytest.importorskip("torch_mlir")
    return torch.compile(fn, backend="inductor", options={"npu_backend": npu_backend})


@pytest.mark.parametrize("npu_backend", BACKENDS)
def test_overlapping_max_pool_backward_over_channels_last_input(npu_backend):
    # Channels-last activations (as Inductor's layout optimisation makes them) and a
    # contiguous upstream gradient: the shape of resnet's stem.
    torch.manual_seed(0)
    x = torch.randn(4, 16, 32, 32).contiguous(memory_format=torch.channels_last)
    upstream = torch.randn(4, 16, 16, 16)

    def loss(x, upstream):
        return (F.max_pool2d(torch.relu(x), 3, 2, 1) * upstream).sum()

    x_cpu = x.clone().requires_grad_()
    loss(x_cpu, upstream).backward()
    x_npu = x.to(NPU).requires_grad_()
    _compile(loss, npu_backend)(x_npu, upstream.to(NPU)).backward()
    assert_close_to_cpu(x_npu.grad, x_cpu.grad)


@pytest.mark.parametrize("npu_backend", BACKENDS)
def test_scatter_add_and_scatter_reduce_sum(npu_backend):
    torch.manual_seed(0)
    base, src = torch.randn(8, 64), torch.randn(8, 32)
    index = torch.randint(0, 64, (8, 32))

    def scatters(base, index, src):
        return (base.scatter_add(1, index, src * 2),
                base.scatter_reduce(1, index, src, "sum", include_self=False))

    actual = _compile(scatters, npu_backend)(base.to(NPU), index.to(NPU), src.to(NPU))
    assert_close_to_cpu(actual, scatters(base, index, src))


@pytest.mark.parametrize("npu_backend", BACKENDS)
def test_arg_reductions_over_all_dimensions_of_permuted_tensors(npu_backend):
    torch.manual_seed(0)
    x = torch.randn(6, 8, 5)

    def arg_reductions(x):
        return (torch.argmin(x.permute(2, 0, 1)), torch.argmax(x.transpose(0, 2)),
                torch.argmax(x.permute(2, 0, 1), dim=1))

    actual = _compile(arg_reductions, npu_backend)(x.to(NPU))
    for a, e in zip(actual, arg_reductions(x)):
        assert a.device.type == "npu"
        assert torch.equal(a.cpu(), e)


def test_scatter_graph_loaded_from_the_fx_graph_cache_runs_in_a_new_process(tmp_path):
    # The second process gets the compiled graph from the cache, so the lowering pass that
    # defines the eager scatter op never runs there: the op must exist regardless.
    code = """
        import torch, torch_npu
        base, index, src = torch.zeros(4, 16), torch.tensor([[0, 3, 3, 15]] * 4), torch.ones(4, 4)
        fn = torch.compile(lambda b, i, s: b.scatter_add(1, i, s * 2), backend="inductor")
        actual = fn(base.npu(), index.npu(), src.npu())
        assert torch.equal(actual.cpu(), base.scatter_add(1, index, src * 2)), actual
        from torch._dynamo.utils import counters
        print(dict(counters["inductor"]))
    """
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    first = run_python(code, env=env)
    second = run_python(code, env=env)
    assert "'fxgraph_cache_miss': 1" in first, first
    assert "'fxgraph_cache_hit': 1" in second, second


def _norm_statistics(x, weight, bias):
    return (F.layer_norm(x, x.shape[-1:], weight, bias),
            F.group_norm(x.transpose(1, 2), 4),
            F.batch_norm(x.transpose(1, 2), None, None, training=True),
            torch.var_mean(x, dim=(1, 2), keepdim=False, correction=0))


@pytest.mark.parametrize("hidden", [64, 100])
def test_norm_statistics_are_cpu_inductor_two_passes_bit_for_bit(hidden):
    # cpu's Inductor computes these small var_means in two passes, other devices with a
    # Welford reduction (slower in C++, and rounded differently): npu takes cpu's choice.
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    # Every reduction here is within cpu's two-pass threshold (1024 elements).
    x, weight, bias = torch.randn(2, 8, hidden), torch.randn(hidden), torch.randn(hidden)
    torch._dynamo.reset()
    on_cpu = torch.compile(_norm_statistics, options={"npu_backend": "default"})(x, weight, bias)
    on_npu, codes = run_and_get_code(torch.compile(_norm_statistics, options={"npu_backend": "default"}),
                                     x.to(NPU), weight.to(NPU), bias.to(NPU))
    assert "Welford" not in "\n".join(codes)
    for a, b in zip(torch.utils._pytree.tree_leaves(on_npu), torch.utils._pytree.tree_leaves(on_cpu)):
        assert a.device.type == "npu" and torch.equal(a.cpu(), b)
    assert_close_to_cpu(on_npu, _norm_statistics(x, weight, bias))


@pytest.mark.parametrize("npu_backend", BACKENDS)
def test_var_mean_with_correction_or_large_reductions(npu_backend):
    # Left to Inductor's own lowering: Bessel's correction, a reduction over every element,
    # one longer than cpu's two-pass threshold.
    torch.manual_seed(0)
    x, long = torch.randn(4, 48), torch.randn(2, 3000)

    def stats(x, long):
        return torch.var_mean(x, dim=1), torch.var_mean(x, dim=None, correction=0), torch.var_mean(long, dim=1, correction=0)

    assert_close_to_cpu(_compile(stats, npu_backend)(x.to(NPU), long.to(NPU)), stats(x, long))


@pytest.mark.parametrize("npu_backend", BACKENDS)
def test_norm_statistics_close_to_cpu_eager(npu_backend):
    torch.manual_seed(0)
    x, weight, bias = torch.randn(2, 12, 100), torch.randn(100), torch.randn(100)
    actual = _compile(_norm_statistics, npu_backend)(x.to(NPU), weight.to(NPU), bias.to(NPU))
    assert_close_to_cpu(actual, _norm_statistics(x, weight, bias))
