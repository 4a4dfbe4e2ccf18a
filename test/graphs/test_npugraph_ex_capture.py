"""npugraph_ex's NPU-graph capture (``_capture.capture_npu_graph``), compared with CPU eager.

Driven through AOT autograd directly, as ``npu_fx_compiler`` drives it, and through
``torch.compile(backend="npugraph_ex")``, including a model that uses a side stream.
"""
import copy

import torch

from graphs_compare import assert_close_to_cpu
from torch_npu.dynamo.npugraph_ex import _capture


def _capture_backend(config=None):
    from torch._dynamo.backends.common import aot_autograd

    def compiler(gm, example_inputs):
        return _capture.capture_npu_graph(gm, example_inputs, config)

    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler, keep_inference_input_mutations=True)


def _stats():
    from torch_npu.compiler.graph_trees import get_manager

    return get_manager(0).stats


def test_capture_inference_with_static_parameters():
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.SiLU(), torch.nn.Linear(8, 2))
    npu_model = copy.deepcopy(cpu_model).npu()
    compiled = torch.compile(npu_model, backend=_capture_backend())
    with torch.no_grad():
        for _ in range(4):
            x = torch.randn(3, 8)
            assert_close_to_cpu(compiled(x.npu()), cpu_model(x))
    assert _stats()["records"] == 1 and _stats()["replays"] >= 2


def test_capture_training_and_input_mutation():
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
    npu_model = copy.deepcopy(cpu_model).npu()
    compiled = torch.compile(npu_model, backend=_capture_backend())
    for _ in range(4):
        x = torch.randn(2, 4)
        for m, inp in ((cpu_model, x), (compiled, x.npu())):
            m.zero_grad(set_to_none=True)
            m(inp).sum().backward()
        for p_cpu, p_npu in zip(cpu_model.parameters(), npu_model.parameters()):
            assert_close_to_cpu(p_npu.grad, p_cpu.grad, rtol=1e-5, atol=1e-5)

    def mutate(x, acc):
        acc.mul_(2).add_(x)
        return acc.sum()

    compiled_mutate = torch.compile(mutate, backend=_capture_backend())
    acc_cpu, acc_npu = torch.ones(3), torch.ones(3, device="npu")
    for _ in range(4):
        x = torch.randn(3)
        assert_close_to_cpu(compiled_mutate(x.npu(), acc_npu), mutate(x, acc_cpu))
        assert_close_to_cpu(acc_npu, acc_cpu)


def test_capture_disabled_by_config_runs_the_graph_directly():
    class Config:
        capture = False
        static_inputs = False

    compiled = torch.compile(lambda x: x * 2 + 1, backend=_capture_backend(Config()))
    for _ in range(3):
        x = torch.randn(4)
        assert_close_to_cpu(compiled(x.npu()), x * 2 + 1)


def test_npugraph_ex_backend_with_a_side_stream():
    # Streams made outside the compiled region trace; the fork/join is captured.
    side = torch.npu.Stream()
    main = torch.npu.current_stream()

    def fn(x):
        y = x * 2
        side.wait_stream(main)
        with torch.npu.stream(side):
            z = y.exp()
        main.wait_stream(side)
        return z + y

    compiled = torch.compile(fn, backend="npugraph_ex", fullgraph=True)
    for _ in range(4):
        x = torch.randn(16)
        assert_close_to_cpu(compiled(x.npu()), (x * 2).exp() + x * 2)
    assert _stats()["records"] >= 1 and _stats()["replays"] >= 1


def test_capture_with_all_inputs_static():
    class Config:
        capture = True
        static_inputs = True

    def fn(x):
        return x.exp() - 1

    compiled = torch.compile(fn, backend=_capture_backend(Config()))
    static_x = torch.randn(6, device="npu")
    with torch.no_grad():
        for _ in range(4):
            new = torch.randn(6)
            static_x.copy_(new.npu())  # same tensor, new values: replayed without a copy
            assert_close_to_cpu(compiled(static_x), fn(new))
        other = torch.randn(6)
        assert_close_to_cpu(compiled(other.npu()), fn(other))  # another address still correct
    from torch_npu.compiler.graph_trees import get_manager

    graphs = [g for f in get_manager(0)._functions for gs in f._graphs.values() for g in gs]
    assert graphs and all(not g.copied_idxs for g in graphs)
