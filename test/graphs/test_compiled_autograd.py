"""mode="reduce-overhead" with compiled autograd on npu, compared with CPU eager.

Compiled autograd traces the whole backward (the AOT backward graphs of the compiled
forward, the loss's backward, gradient accumulation) into one graph, which the compiler it
is given (here ``torch.compile(mode="reduce-overhead")``) compiles; that graph must be
recorded into the NPU graph trees and replayed like any other, so that a training step is
two replays and no backward runs on autograd's device thread.
"""
import copy

import torch
from torch._dynamo import compiled_autograd

import torch_npu
from graphs_compare import assert_close_to_cpu


def test_backward_traced_by_compiled_autograd_is_recorded_and_matches_cpu():
    from torch_npu.compiler import graph_trees

    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 4)
    )
    npu_model = copy.deepcopy(cpu_model).npu()
    compiled = torch.compile(npu_model, mode="reduce-overhead")
    backward_compiler = torch.compile(mode="reduce-overhead")
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    npu_opt = torch.optim.SGD(npu_model.parameters(), lr=0.1)
    for _ in range(6):
        x, y = torch.randn(4, 8), torch.randn(4, 4)
        cpu_opt.zero_grad(set_to_none=True)
        cpu_loss = torch.nn.functional.mse_loss(cpu_model(x), y)
        cpu_loss.backward()

        torch_npu.npu.mark_step_begin()
        npu_opt.zero_grad(set_to_none=True)
        with compiled_autograd._enable(backward_compiler):
            npu_loss = torch.nn.functional.mse_loss(compiled(x.npu()), y.npu())
            npu_loss.backward()

        assert_close_to_cpu(npu_loss.detach(), cpu_loss.detach(), atol=1e-5, rtol=1e-5)
        for p_cpu, p_npu in zip(cpu_model.parameters(), npu_model.parameters()):
            assert_close_to_cpu(p_npu.grad, p_cpu.grad, atol=1e-5, rtol=1e-5)
        cpu_opt.step()
        npu_opt.step()
    for p_cpu, p_npu in zip(cpu_model.parameters(), npu_model.parameters()):
        assert_close_to_cpu(p_npu.detach(), p_cpu.detach(), atol=1e-5, rtol=1e-5)

    stats = graph_trees.get_manager(0).stats
    # The forward and compiled autograd's backward graph (compiled without autograd, so an
    # inference graph to the trees) are both recorded: none runs uncaptured, although the
    # backward graph takes the sizes it specialised on as (unused) cpu tensors.
    assert stats["eager_runs"] == 0, stats
    assert stats["records"] == 2, stats
    assert stats["replays"] >= 6, stats
    modes = sorted(fn.mode.value for fn in graph_trees.get_manager(0)._functions if fn.num_graphs())
    assert modes == ["forward", "inference"], modes


def test_unused_inputs_do_not_count_as_work_on_their_device():
    from torch.fx.experimental.proxy_tensor import make_fx

    from torch_npu.compiler.graph_trees.graph_facts import CPU_TENSORS, capture_blocker, graph_devices

    def uses_only_x(x, size_carrier):
        return x * 2

    def uses_both(x, scale):
        return x * scale

    x, cpu_tensor = torch.randn(3, device="npu"), torch.empty(0, 4)
    unused = make_fx(uses_only_x)(x, cpu_tensor)
    assert graph_devices(unused) == {x.device}
    assert capture_blocker(graph_devices(unused)) is None
    used = make_fx(uses_both)(x, torch.tensor(2.0))
    assert capture_blocker(graph_devices(used)) == CPU_TENSORS
