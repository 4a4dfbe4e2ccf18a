"""torch.compile(mode="reduce-overhead") on npu: Inductor's kernels recorded into NPU graph
trees and replayed, through Inductor's cudagraph_policy slot; compared with CPU eager.

Each test asserts that graphs were recorded and replayed (graph-tree counters, recorded
kernel launches), not only that results are right.
"""
import copy
import logging
import threading
import warnings

import pytest
import torch

import torch_npu
from graphs_compare import assert_close_to_cpu


def _manager(index=0):
    from torch_npu.compiler import graph_trees

    return graph_trees.get_manager(index)


def _recorded_graphs(index=0):
    return [g for fn in _manager(index)._functions for gs in fn._graphs.values() for g in gs]


class MLP(torch.nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, 16)
        self.ln = torch.nn.LayerNorm(16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.ln(self.fc1(x))) * 0.5 + 0.1)


def _pair(seed=0):
    torch.manual_seed(seed)
    cpu = MLP()
    return cpu, copy.deepcopy(cpu).npu()


def test_inference_replays_inductor_kernels():
    def fn(x, y):
        return torch.softmax(x.sin() * 2 + y, dim=-1).cos()

    compiled = torch.compile(fn, mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            x, y = torch.randn(4, 8), torch.randn(4, 8)
            assert_close_to_cpu(compiled(x.npu(), y.npu()), fn(x, y))
    stats = _manager().stats
    assert stats["warmups"] == 1 and stats["records"] == 1 and stats["replays"] == 3, stats
    assert stats["eager_runs"] == 0
    (graph,) = _recorded_graphs()
    # The recorded work is Inductor's fused host kernels, launched from the graph.
    assert graph.graph.num_nodes() >= 1
    assert graph.graph.num_kernel_launches() == graph.graph.num_nodes()
    # The old "runs without graph capture" notice is gone.
    assert not [w for w in caught if "reduce-overhead" in str(w.message)]


def test_triton_cudagraphs_option_is_the_same_path():
    compiled = torch.compile(lambda x: (x * 3).tanh(), options={"triton.cudagraphs": True})
    for _ in range(4):
        x = torch.randn(16)
        assert_close_to_cpu(compiled(x.npu()), (x * 3).tanh())
    assert _manager().stats["replays"] == 2


def test_training_forward_and_backward_graphs_replay():
    cpu_model, npu_model = _pair()
    compiled = torch.compile(npu_model, mode="reduce-overhead")
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    npu_opt = torch.optim.SGD(npu_model.parameters(), lr=0.1)
    for _ in range(5):
        torch_npu.npu.mark_step_begin()
        x, y = torch.randn(4, 8), torch.randn(4, 4)
        for model, opt, xs, ys in ((cpu_model, cpu_opt, x, y), (compiled, npu_opt, x.npu(), y.npu())):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(xs), ys).backward()
            opt.step()
    for p_cpu, p_npu in zip(cpu_model.parameters(), npu_model.parameters()):
        assert_close_to_cpu(p_npu.detach(), p_cpu.detach(), atol=1e-5, rtol=1e-5)
    stats = _manager().stats
    assert stats["records"] == 2, stats  # the forward and the backward graph
    assert stats["replays"] >= 6 and stats["eager_runs"] == 0, stats
    modes = sorted(fn.mode.value for fn in _manager()._functions if fn.num_graphs())
    assert modes == ["backward", "forward"]
    # The backward borrows the parameters and the forward's activations: nothing but the
    # incoming gradient is copied into it.
    backward = next(g for fn in _manager()._functions if fn.mode.value == "backward" for gs in fn._graphs.values() for g in gs)
    assert len(backward.copied_idxs) <= 1, backward.copied_idxs


def test_mlir_kernels_are_recorded_too():
    pytest.importorskip("torch_mlir")

    def fn(x):
        return (x.exp() * 0.5 + x.sin()).relu()

    compiled = torch.compile(fn, options={"triton.cudagraphs": True, "npu_backend": "mlir"})
    for _ in range(4):
        x = torch.randn(32)
        assert_close_to_cpu(compiled(x.npu()), fn(x), atol=1e-5, rtol=1e-5)
    assert _manager().stats["records"] == 1 and _manager().stats["replays"] == 2


def test_compiled_optimizer_step():
    cpu_model, npu_model = _pair(1)
    cpu_opt = torch.optim.Adam(cpu_model.parameters(), lr=0.01)
    # capturable=True keeps Adam's step counters on the device (Dynamo turns it on by
    # itself only for cuda/xpu parameters); otherwise they are cpu tensors and the graph
    # runs uncaptured, as on CUDA.
    npu_opt = torch.optim.Adam(npu_model.parameters(), lr=0.01, capturable=True)

    @torch.compile(mode="reduce-overhead")
    def npu_step():
        npu_opt.step()

    for _ in range(4):
        x = torch.randn(4, 8)
        for model, opt in ((cpu_model, cpu_opt), (npu_model, npu_opt)):
            opt.zero_grad(set_to_none=False)
            model(x.to(next(model.parameters()).device)).square().mean().backward()
        cpu_opt.step()
        npu_step()
    for p_cpu, p_npu in zip(cpu_model.parameters(), npu_model.parameters()):
        assert_close_to_cpu(p_npu.detach(), p_cpu.detach(), atol=1e-5, rtol=1e-5)
    stats = _manager().stats
    assert stats["records"] >= 1 and stats["replays"] >= 1, stats


def test_input_mutation_happens_once_per_call():
    def fn(x, y):
        x.mul_(2).add_(y)
        return x.sum(0)

    compiled = torch.compile(fn, mode="reduce-overhead")
    x_cpu, y_cpu = torch.randn(3, 4), torch.randn(3, 4)
    x_npu, y_npu = x_cpu.npu(), y_cpu.npu()
    for _ in range(4):
        assert_close_to_cpu(compiled(x_npu, y_npu), fn(x_cpu, y_cpu))
        assert_close_to_cpu(x_npu, x_cpu)
    assert _manager().stats["replays"] == 2


def test_mutated_input_at_a_stable_address_is_updated_in_place():
    # A KV cache or a state buffer passed at the same address every call: recorded on its
    # memory, like a buffer, instead of copied in and back at every replay.
    def fn(x, state):
        state.mul_(0.5).add_(x)
        return state.exp()

    compiled = torch.compile(fn, mode="reduce-overhead")
    state_cpu = torch.zeros(6)
    state_npu = state_cpu.npu()
    for _ in range(5):
        x = torch.randn(6)
        assert_close_to_cpu(compiled(x.npu(), state_npu), fn(x, state_cpu))
        assert_close_to_cpu(state_npu, state_cpu)
    (graph,) = _recorded_graphs()
    state_idx = next(i for i, p in enumerate(graph.placeholders) if isinstance(p, torch.Tensor) and p.data_ptr() == state_npu.data_ptr())
    assert state_idx in graph.borrowed_idxs and graph.writeback_idxs == ()
    assert graph.copies["inputs"] == 4  # x only: the run after recording, then three replays
    assert _manager().stats["replays"] == 3


def test_mutated_input_at_a_new_address_every_call_is_copied_in_and_back():
    def fn(x, state):
        state.add_(x)
        return state * 3

    compiled = torch.compile(fn, mode="reduce-overhead")
    for _ in range(5):
        x, state = torch.randn(4), torch.randn(4)
        state_npu = state.npu()
        assert_close_to_cpu(compiled(x.npu(), state_npu), fn(x, state))
        assert_close_to_cpu(state_npu, state)
    (graph,) = _recorded_graphs()
    assert graph.writeback_idxs != () and _manager().stats["replays"] == 3


def test_new_shapes_record_new_graphs_and_warn_past_the_limit(caplog):
    from torch._inductor import config

    compiled = torch.compile(lambda x: x.cos() * 2, mode="reduce-overhead", dynamic=True)
    with caplog.at_level(logging.WARNING, logger="torch_npu.compiler.graph_trees"), config.patch(
        {"triton.cudagraph_dynamic_shape_warn_limit": 2}
    ):
        for n in (3, 4, 5, 6):
            for _ in range(3):
                x = torch.randn(n)
                assert_close_to_cpu(compiled(x.npu()), x.cos() * 2)
    stats = _manager().stats
    assert stats["records"] == 4 and stats["replays"] == 4, stats
    messages = [r.getMessage() for r in caplog.records if "distinct sizes" in r.getMessage()]
    assert len(messages) == 1 and "cudagraph_dynamic_shape_warn_limit" in messages[0]


def test_graph_with_cpu_tensors_runs_uncaptured_with_one_log_line(caplog):
    def fn(a, b):
        return a.sin() + 1, b.cos() * 2

    compiled = torch.compile(fn, mode="reduce-overhead")
    with caplog.at_level(logging.WARNING, logger="torch_npu.compiler.graph_trees"):
        for _ in range(3):
            a, b = torch.randn(4), torch.randn(4)
            out_a, out_b = compiled(a.npu(), b)
            assert_close_to_cpu(out_a, a.sin() + 1)
            torch.testing.assert_close(out_b, b.cos() * 2)
    lines = [r.getMessage() for r in caplog.records if "runs uncaptured" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "cpu tensors" in lines[0] and "torch.npu.graphs.capture_report" in lines[0]
    assert _manager().stats["records"] == 0


def test_graph_with_data_dependent_shapes_runs_uncaptured_naming_them(caplog):
    def fn(x):
        return (x[x.nonzero(as_tuple=True)] * 2).sum() + x.sum()

    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = torch.compile(fn, mode="reduce-overhead", fullgraph=True)
        with caplog.at_level(logging.WARNING, logger="torch_npu.compiler.graph_trees"):
            for values in ([0.0, 1.5, 0.0, -2.0], [3.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 4.0]):
                x = torch.tensor(values)
                assert_close_to_cpu(compiled(x.npu()), fn(x))
    lines = [r.getMessage() for r in caplog.records if "runs uncaptured" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "data-dependent output shapes" in lines[0] and "cpu tensors" not in lines[0]
    assert _manager().stats["records"] == 0 and _manager().stats["eager_runs"] == 3


def test_data_dependent_shapes_are_named_after_an_fx_graph_cache_hit(caplog):
    # The facts come from the post-grad graph, which a cache hit does not run: they are kept
    # beside the cache entry, and Inductor's own devices (cpu, for these size checks) would
    # name cpu tensors instead.
    from torch._dynamo.utils import counters

    from torch_npu.compiler import graph_trees
    from torch_npu.compiler.inductor import cache_side_notes

    def fn(x):
        return (x[x.nonzero(as_tuple=True)] * 3).sum() - x.sum()

    hits = []
    for round_ in range(2):
        hits.append(counters["inductor"]["fxgraph_cache_hit"])
        torch._dynamo.reset()
        graph_trees.reset()
        cache_side_notes.forget_in_memory()  # as in a new process
        caplog.clear()
        with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
            compiled = torch.compile(fn, mode="reduce-overhead", fullgraph=True)
            with caplog.at_level(logging.WARNING, logger="torch_npu.compiler.graph_trees"):
                x = torch.tensor([0.0, 2.5, 0.0, -1.0])
                assert_close_to_cpu(compiled(x.npu()), fn(x))
        lines = [r.getMessage() for r in caplog.records if "runs uncaptured" in r.getMessage()]
        assert len(lines) == 1 and "data-dependent output shapes" in lines[0], (round_, lines)
    assert counters["inductor"]["fxgraph_cache_hit"] > hits[1], dict(counters["inductor"])


def test_capture_blocker_is_one_set_of_rules_over_devices():
    from torch_npu.compiler.graph_trees.graph_facts import CPU_TENSORS, DATA_DEPENDENT_SHAPES, capture_blocker

    npu0, npu1, cpu = torch.device("npu", 0), torch.device("npu", 1), torch.device("cpu")
    assert capture_blocker({npu0}) is None
    assert capture_blocker({npu0, cpu}, data_dependent_shapes=True) == CPU_TENSORS
    assert capture_blocker({npu0}, data_dependent_shapes=True) == DATA_DEPENDENT_SHAPES
    assert "several npu devices" in capture_blocker({npu0, npu1})
    assert capture_blocker({npu0}, compiler_reason="an incompatible op") == "an incompatible op"
    assert capture_blocker(set()) == "the graph has no npu tensors"


def test_graphs_of_other_devices_are_handed_back_to_the_default():
    from torch._inductor import config

    from torch_npu.compiler.inductor.reduce_overhead import NpuGraphPolicy

    compiled = torch.compile(lambda x: x.sin() * 2, mode="reduce-overhead")
    x = torch.randn(8)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), x.sin() * 2)
    policy = config.cudagraph_policy
    assert isinstance(policy, NpuGraphPolicy) and policy.previous is None

    class FakeGraph:
        device_types = {"cpu"}
        current_callable = object()

    graph = FakeGraph()
    assert policy.should_wrap(graph) is True
    assert policy.wrap_output(graph) is graph and graph.current_callable is FakeGraph.current_callable
    assert _manager().stats["records"] == 0


def test_policy_is_seen_by_every_thread():
    from torch._inductor import config

    from torch_npu.compiler.inductor.reduce_overhead import NpuGraphPolicy

    torch.compile(lambda x: x + 1)(torch.randn(2, device="npu"))  # the policy is installed by now
    seen = []
    thread = threading.Thread(target=lambda: seen.append(type(config.cudagraph_policy)))
    thread.start()
    thread.join(timeout=60)
    assert seen == [NpuGraphPolicy]


def test_cache_hit_path_is_captured_too():
    from torch._dynamo.utils import counters

    def fn(x):
        return (x * 1.5).sigmoid() - x

    for round_ in range(2):
        counters.clear()
        torch._dynamo.reset()
        from torch_npu.compiler import graph_trees

        graph_trees.reset()  # fresh trees per round
        compiled = torch.compile(fn, mode="reduce-overhead")
        for _ in range(3):
            x = torch.randn(10)
            assert_close_to_cpu(compiled(x.npu()), fn(x))
        assert _manager().stats["replays"] == 1, (round_, dict(_manager().stats))
    hits = counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"]
    assert hits >= 1, dict(counters)


def _output_copies():
    return sum(g.copies["outputs"] for g in _recorded_graphs())


def _input_copies():
    return sum(g.copies["inputs"] for g in _recorded_graphs())


def test_replay_hands_out_the_static_outputs_in_place():
    compiled = torch.compile(lambda x: (x.sin() + 1) * 3, mode="reduce-overhead")
    x = torch.randn(6)
    outs = [compiled(x.npu()) for _ in range(4)]
    (graph,) = _recorded_graphs()
    # The last two calls replayed; their outputs live in the graph's own output memory.
    assert outs[-1].data_ptr() == graph.static_outputs[0].data_ptr()
    assert _output_copies() == 0
    assert_close_to_cpu(outs[-1], (x.sin() + 1) * 3)


def test_output_of_a_finished_step_stays_valid_until_overwritten():
    f = torch.compile(lambda x: (x.sin() + 1) * 3, mode="reduce-overhead")
    g = torch.compile(lambda x: x.cos() - 2, mode="reduce-overhead")
    xs = [torch.randn(6) for _ in range(6)]
    kept_f, kept_g = [], []
    for x in xs:
        torch_npu.npu.mark_step_begin()
        kept_f.append(f(x.npu()))
        kept_g.append(g(x.npu()))
    # The last step's outputs are valid after the step (and after the other graph ran).
    assert_close_to_cpu(kept_f[-1], (xs[-1].sin() + 1) * 3)
    assert_close_to_cpu(kept_g[-1], xs[-1].cos() - 2)
    # The warm-up's output is not graph memory; the recording's is, and was overwritten.
    assert_close_to_cpu(kept_f[0], (xs[0].sin() + 1) * 3)
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        kept_f[1].cpu()
    assert _manager().stats["replays"] == 8 and _output_copies() == 0


def test_reading_an_overwritten_output_fails_loudly_naming_it():
    compiled = torch.compile(lambda x: (x * 2).exp(), mode="reduce-overhead")
    x = torch.randn(5)
    for _ in range(2):
        compiled(x.npu())
    first = compiled(x.npu())  # a replay: graph memory handed out
    assert_close_to_cpu(first, (x * 2).exp())
    second = compiled(x.npu())  # a new invocation replays over it
    assert first.shape == (5,)  # metadata stays readable
    for read in (lambda t: t.cpu(), lambda t: t + 1, lambda t: t.sum()):
        with pytest.raises(RuntimeError, match="overwritten by a subsequent run") as info:
            read(first)
        assert "output 0 of NPU graph reduce-overhead" in str(info.value)
        assert "mark_step_begin" in str(info.value) and "clone" in str(info.value)
    assert_close_to_cpu(second, (x * 2).exp())
    # A clone taken before the next step survives it.
    kept = second.clone()
    compiled(x.npu())
    assert_close_to_cpu(kept, (x * 2).exp())


def _read_after_overwrite(compiled, x):
    """Warms up and records ``compiled``, overwrites an output by the next replay, reads it;
    returns the error message of that read."""
    for _ in range(2):
        compiled(x.npu())
    first = compiled(x.npu())
    compiled(x.npu())
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run") as info:
        first.cpu()
    return str(info.value)


def _scaled_sine(x):
    return (x * 3).sin()  # where the output is produced


def test_overwritten_output_error_carries_the_stack_where_it_was_produced():
    message = _read_after_overwrite(torch.compile(_scaled_sine, mode="reduce-overhead"), torch.randn(4))
    # As CUDA's: the user's frame that produced the output, after the fix.
    assert "mark_step_begin" in message.split("Stack trace")[0]
    trace = message.split("Stack trace of where it was produced:")[1]
    assert "test_reduce_overhead.py" in trace and "in _scaled_sine" in trace, message
    assert "return (x * 3).sin()  # where the output is produced" in trace, message


def _shifted_cosine(x):
    return (x + 5).cos()  # the line an FX-graph-cache hit must still name


def test_overwritten_output_error_names_the_stack_after_an_fx_graph_cache_hit():
    from torch._dynamo.utils import counters

    from torch_npu.compiler import graph_trees
    from torch_npu.compiler.inductor import cache_side_notes

    x = torch.randn(7)
    hits = []
    for round_ in range(2):
        hits.append(counters["inductor"]["fxgraph_cache_hit"])
        torch._dynamo.reset()
        graph_trees.reset()
        # As in a new process: only the file next to the cached graph knows the stacks.
        cache_side_notes.forget_in_memory()
        message = _read_after_overwrite(torch.compile(_shifted_cosine, mode="reduce-overhead"), x)
        trace = message.split("Stack trace of where it was produced:")[1]
        assert "the line an FX-graph-cache hit must still name" in trace, (round_, message)
    # The second round loaded the graph from the FX-graph cache.
    assert counters["inductor"]["fxgraph_cache_hit"] > hits[1], dict(counters["inductor"])


def test_overwritten_gradient_error_carries_the_stack_of_its_forward():
    cpu_model, npu_model = _pair(5)
    compiled = torch.compile(npu_model, mode="reduce-overhead")
    x = torch.randn(4, 8, device="npu")
    grads = []
    for _ in range(4):
        torch_npu.npu.mark_step_begin()
        for p in npu_model.parameters():
            p.grad = None
        compiled(x).sum().backward()
        grads.append(npu_model.fc2.weight.grad)
    # The third step's gradient was the backward graph's memory, overwritten by the fourth.
    with pytest.raises(RuntimeError, match="accessing gradient tensor output of NPU graphs") as info:
        grads[2].cpu()
    trace = str(info.value).split("Stack trace of where it was produced:")[1]
    assert "test_reduce_overhead.py" in trace and "in forward" in trace, str(info.value)
    assert _manager().stats["replays"] >= 4


def test_outputs_of_recorded_graphs_feed_other_graphs_in_place():
    f = torch.compile(lambda x: (x.sin() * 2).relu(), mode="reduce-overhead")
    g = torch.compile(lambda y, x: (y + x).tanh(), mode="reduce-overhead")
    x_cpu = torch.randn(7)
    x = x_cpu.npu()
    for _ in range(5):
        torch_npu.npu.mark_step_begin()
        y = f(x)
        z = g(y, x)
    assert_close_to_cpu(z, ((x_cpu.sin() * 2).relu() + x_cpu).tanh())
    g_graph = next(gr for fn in _manager()._functions for gs in fn._graphs.values() for gr in gs if 0 in gr.borrowed_idxs)
    f_graph = next(gr for gr in _recorded_graphs() if gr is not g_graph)
    # y is f's static output, and g was captured on that very memory: used in place.
    assert y.data_ptr() == f_graph.static_outputs[0].data_ptr() == g_graph.placeholders[0].data_ptr()
    # Only x, an ordinary input, is copied in at each replay.
    assert g_graph.borrowed_idxs == (0,) and g_graph.copied_idxs == (1,)
    assert g_graph.copies["inputs"] == 4 and _output_copies() == 0


def test_outputs_kept_within_one_step_record_a_sibling_instead_of_overwriting():
    compiled = torch.compile(lambda x: x * 4 - 1, mode="reduce-overhead")
    x = torch.randn(3)
    torch_npu.npu.mark_step_begin()
    compiled(x.npu())
    compiled(x.npu())
    torch_npu.npu.mark_step_begin()
    a = compiled(x.npu())  # a replay of the recorded graph
    b = compiled(x.npu() + 1)  # same step, a still held: a sibling graph, a stays valid
    assert_close_to_cpu(a, x * 4 - 1)
    assert_close_to_cpu(b, (x + 1) * 4 - 1)
    assert len(_recorded_graphs()) == 2 and _output_copies() == 0


def test_gradient_accumulation_within_one_step():
    cpu_model, npu_model = _pair(3)
    compiled = torch.compile(npu_model, mode="reduce-overhead")
    for _ in range(4):
        torch_npu.npu.mark_step_begin()
        for model in (cpu_model, compiled):
            for p in (cpu_model if model is cpu_model else npu_model).parameters():
                p.grad = None
        for k in range(2):
            x = torch.randn(4, 8, generator=torch.Generator().manual_seed(k))
            cpu_model(x).square().mean().backward()
            compiled(x.npu()).square().mean().backward()
        for p_cpu, p_npu in zip(cpu_model.parameters(), npu_model.parameters()):
            assert_close_to_cpu(p_npu.grad, p_cpu.grad, atol=1e-5, rtol=1e-5)
    assert _manager().stats["replays"] >= 6 and _manager().stats["eager_runs"] == 0


def test_thousand_replays_leave_memory_allocated_unchanged():
    compiled = torch.compile(lambda x: (x.sin() * 2).cos() + x, mode="reduce-overhead")
    x = torch.randn(128, device="npu")
    for _ in range(3):
        out = compiled(x)
    del out
    before = torch.npu.memory_allocated()
    for _ in range(1000):
        compiled(x)
    assert torch.npu.memory_allocated() == before
    assert _manager().stats["replays"] >= 1000


def test_re_recording_is_bounded_by_the_unexpected_rerecord_limit(caplog):
    from torch._inductor import config

    torch.manual_seed(0)
    cpu = torch.nn.Linear(4, 3)
    npu = copy.deepcopy(cpu).npu()
    compiled = torch.compile(npu, mode="reduce-overhead")
    with caplog.at_level(logging.WARNING, logger="torch_npu.compiler.graph_trees"), config.patch(
        {"triton.cudagraph_unexpected_rerecord_limit": 2}
    ), torch.no_grad():
        for i in range(7):
            # The parameter moves to new memory at every call: a recorded graph, which
            # borrowed it at its old address, cannot replay.
            w = torch.randn(3, 4)
            cpu.weight.data = w
            npu.weight.data = w.npu()
            x = torch.randn(2, 4)
            assert_close_to_cpu(compiled(x.npu()), cpu(x))
    stats = _manager().stats
    # warm-up, the first recording, two re-recordings; then uncaptured.
    assert stats["records"] == 3 and stats["eager_runs"] == 3, stats
    lines = [r.getMessage() for r in caplog.records if "runs uncaptured" in r.getMessage()]
    assert len(lines) == 1 and "cudagraph_unexpected_rerecord_limit=2" in lines[0], lines
