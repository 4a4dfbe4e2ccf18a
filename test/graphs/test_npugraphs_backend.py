"""torch.compile(backend="npugraphs"): AOT autograd + NPU graph trees, compared with CPU eager.

Covers inference and training loops, mark_step_begin, changing batch sizes, two models
interleaved, several devices, input mutation, output lifetime, and the backend's errors.
"""
import copy
import logging

import pytest
import torch

import torch_npu
from graphs_compare import assert_close_to_cpu


def _trees():
    from torch_npu.compiler import graph_trees

    return graph_trees


def _stats(device_index=0):
    manager = _trees().get_manager(device_index, create_if_none_exists=False)
    return dict(manager.stats) if manager is not None else {}


class MLP(torch.nn.Module):
    def __init__(self, d_in=8, d_hidden=16, d_out=4):
        super().__init__()
        self.fc1 = torch.nn.Linear(d_in, d_hidden)
        self.fc2 = torch.nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(torch.nn.functional.silu(self.fc1(x)) * 0.5 + 0.1)


def _pair(model_cls=MLP, seed=0, device="npu", **kw):
    torch.manual_seed(seed)
    cpu = model_cls(**kw)
    return cpu, copy.deepcopy(cpu).to(device)


def test_inference_loop_records_once_then_replays():
    cpu_model, npu_model = _pair()
    compiled = torch.compile(npu_model, backend="npugraphs")
    with torch.no_grad():
        for _ in range(5):
            x = torch.randn(4, 8)
            assert_close_to_cpu(compiled(x.npu()), cpu_model(x))
    stats = _stats()
    assert stats["warmups"] == 1 and stats["records"] == 1
    assert stats["replays"] >= 3 and stats["eager_runs"] == 0


def test_parameters_are_static_inputs_not_copied():
    _, npu_model = _pair()
    compiled = torch.compile(npu_model, backend="npugraphs")
    with torch.no_grad():
        for _ in range(3):
            compiled(torch.randn(2, 8, device="npu"))
    manager = _trees().get_manager(0)
    graphs = [g for fn in manager._functions for gs in fn._graphs.values() for g in gs]
    assert len(graphs) == 1
    param_ptrs = {p.data_ptr() for p in npu_model.parameters()}
    assert param_ptrs <= set(graphs[0].borrowed_ptrs)
    assert len(graphs[0].copied_idxs) == 1  # only x is copied in


def test_training_loop_with_optimizer_and_mark_step_begin():
    cpu_model, npu_model = _pair()
    compiled = torch.compile(npu_model, backend="npugraphs")
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.05, momentum=0.9)
    npu_opt = torch.optim.SGD(npu_model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(6):
        torch_npu.npu.mark_step_begin()
        x, y = torch.randn(4, 8), torch.randn(4, 4)
        losses = []
        for model, opt, xs, ys in ((cpu_model, cpu_opt, x, y), (compiled, npu_opt, x.npu(), y.npu())):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(model(xs), ys)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        assert_close_to_cpu(losses[1], losses[0], rtol=1e-5, atol=1e-5)
    for p_cpu, p_npu in zip(cpu_model.parameters(), npu_model.parameters()):
        assert_close_to_cpu(p_npu.detach(), p_cpu.detach(), rtol=1e-5, atol=1e-5)
    stats = _stats()
    assert stats["records"] == 2  # one forward, one backward graph
    assert stats["replays"] >= 6


def test_training_without_mark_step_begin_and_gradient_accumulation():
    cpu_model, npu_model = _pair(seed=1)
    compiled = torch.compile(npu_model, backend="npugraphs")
    for _ in range(4):
        xs = [torch.randn(4, 8) for _ in range(2)]
        # Two forwards before their backwards: the first forward's activations must
        # survive the second forward's replay.
        cpu_losses = [cpu_model(x).square().mean() for x in xs]
        npu_losses = [compiled(x.npu()).square().mean() for x in xs]
        for loss in reversed(npu_losses):
            loss.backward()
        for loss in reversed(cpu_losses):
            loss.backward()
        for p_cpu, p_npu in zip(cpu_model.parameters(), npu_model.parameters()):
            assert_close_to_cpu(p_npu.grad, p_cpu.grad, rtol=1e-5, atol=1e-5)


def test_changing_batch_size_records_a_graph_per_shape():
    cpu_model, npu_model = _pair()
    compiled = torch.compile(npu_model, backend="npugraphs")
    with torch.no_grad():
        for batch in (4, 8, 4, 8, 3, 4, 8, 3, 3):
            x = torch.randn(batch, 8)
            assert_close_to_cpu(compiled(x.npu()), cpu_model(x))
    stats = _stats()
    # Each batch size seen more than once is recorded; its later calls replay.
    assert stats["records"] >= 3
    assert stats["replays"] >= 2


def test_two_models_interleaved():
    cpu_a, npu_a = _pair(seed=2)
    cpu_b, npu_b = _pair(seed=3, d_in=4, d_out=8)
    ca = torch.compile(npu_a, backend="npugraphs")
    cb = torch.compile(npu_b, backend="npugraphs")
    with torch.no_grad():
        for _ in range(4):
            x = torch.randn(5, 8)
            ya = ca(x.npu())
            yb = cb(ya)  # b consumes a's output (graph memory)
            ref_a = cpu_a(x)
            ref_b = cpu_b(ref_a)
            assert_close_to_cpu(ya, ref_a)
            ya2 = ca(yb)  # a again, on b's output: a's memory (ya) is overwritten
            assert_close_to_cpu(yb, ref_b)
            assert_close_to_cpu(ya2, cpu_a(ref_b))


def test_two_models_interleaved_training():
    cpu_a, npu_a = _pair(seed=4)
    cpu_b, npu_b = _pair(seed=5, d_in=4, d_out=2)
    ca = torch.compile(npu_a, backend="npugraphs")
    cb = torch.compile(npu_b, backend="npugraphs")
    for _ in range(4):
        torch_npu.npu.mark_step_begin()
        x = torch.randn(3, 8)
        for a, b, inp in ((cpu_a, cpu_b, x), (ca, cb, x.npu())):
            for m in (a, b):
                m.zero_grad(set_to_none=True)
            b(a(inp)).sum().backward()
        for cpu_m, npu_m in ((cpu_a, npu_a), (cpu_b, npu_b)):
            for p_cpu, p_npu in zip(cpu_m.parameters(), npu_m.parameters()):
                assert_close_to_cpu(p_npu.grad, p_cpu.grad, rtol=1e-5, atol=1e-5)


def test_multiple_devices(two_devices):
    d0, d1 = two_devices
    cpu_model, m0 = _pair(device=d0)
    m1 = copy.deepcopy(cpu_model).to(d1)
    c0 = torch.compile(m0, backend="npugraphs")
    c1 = torch.compile(m1, backend="npugraphs")
    for _ in range(4):
        x = torch.randn(4, 8)
        torch_npu.npu.mark_step_begin()
        y0 = c0(x.to(d0))
        y1 = c1(x.to(d1))
        assert y0.device == d0 and y1.device == d1
        ref = cpu_model(x)
        assert_close_to_cpu(y0.detach(), ref.detach())
        assert_close_to_cpu(y1.detach(), ref.detach())
        (y0.sum() + 0).backward()
        y1.sum().backward()
    for p0, p1 in zip(m0.parameters(), m1.parameters()):
        assert_close_to_cpu(p0.grad, p1.grad.cpu())
    assert _stats(0)["records"] >= 1 and _stats(1)["records"] >= 1


def test_outputs_of_a_finished_step_stay_valid():
    def fn(x):
        return (x.sin() + 1) * 3

    compiled = torch.compile(fn, backend="npugraphs")
    xs = [torch.randn(6) for _ in range(5)]
    outs = []
    for x in xs:
        torch_npu.npu.mark_step_begin()
        outs.append(compiled(x.npu()))
    # The last step's output is valid after its step; the warm-up's is not graph memory.
    assert_close_to_cpu(outs[-1], fn(xs[-1]))
    assert_close_to_cpu(outs[0], fn(xs[0]))
    # The others were graph memory that later replays overwrote: reading one fails loudly.
    for out in outs[1:-1]:
        with pytest.raises(RuntimeError, match="overwritten by a subsequent run.*mark_step_begin"):
            out.cpu()


def test_overwritten_output_error_carries_the_stack_where_it_was_produced():
    def produce(x):
        return (x - 1).exp()  # where the output is produced

    compiled = torch.compile(produce, backend="npugraphs")
    x = torch.randn(6)
    outs = [compiled(x.npu()) for _ in range(4)]
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run") as info:
        outs[2].cpu()
    trace = str(info.value).split("Stack trace of where it was produced:")[1]
    assert "test_npugraphs_backend.py" in trace and "return (x - 1).exp()" in trace, str(info.value)


def test_input_mutation_once_per_call():
    def fn(x, acc):
        acc.add_(x)
        return acc * 2

    compiled = torch.compile(fn, backend="npugraphs")
    acc_cpu = torch.zeros(5)
    acc_npu = acc_cpu.npu()
    for _ in range(5):
        x = torch.randn(5)
        out_npu = compiled(x.npu(), acc_npu)
        out_cpu = fn(x, acc_cpu)
        assert_close_to_cpu(acc_npu, acc_cpu)
        assert_close_to_cpu(out_npu, out_cpu)


def test_buffer_mutation_batchnorm_training():
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.BatchNorm1d(6))
    npu_model = copy.deepcopy(cpu_model).npu()
    compiled = torch.compile(npu_model, backend="npugraphs")
    for _ in range(4):
        x = torch.randn(8, 6)
        out = compiled(x.npu())
        ref = cpu_model(x)
        assert_close_to_cpu(out.detach(), ref.detach(), rtol=1e-5, atol=1e-5)
        out.sum().backward()
        ref.sum().backward()
    assert_close_to_cpu(npu_model[1].running_mean, cpu_model[1].running_mean)
    assert_close_to_cpu(npu_model[1].running_var, cpu_model[1].running_var)


def test_random_ops_advance_between_replays():
    def fn(x):
        return torch.nn.functional.dropout(x, p=0.5, training=True)

    compiled = torch.compile(fn, backend="npugraphs")
    x = torch.ones(2000, device="npu")
    outs = [compiled(x).cpu() for _ in range(4)]
    assert _stats()["replays"] >= 2
    for o in outs:
        kept = (o != 0).float().mean()
        assert 0.4 < kept < 0.6
        assert set(o.unique().tolist()) <= {0.0, 2.0}
    assert not torch.equal(outs[2], outs[3])


def _uncaptured_lines(caplog):
    return [r.getMessage() for r in caplog.records if "runs uncaptured" in r.getMessage()]


def test_graph_with_cpu_tensors_runs_eagerly_with_one_log_line(caplog):
    def fn(x, scale):
        return x.sin() * scale  # a cpu scalar tensor: cpu work is not recorded

    compiled = torch.compile(fn, backend="npugraphs")
    x, scale = torch.randn(3), torch.tensor(2.5)
    with caplog.at_level(logging.WARNING, logger="torch_npu.compiler.graph_trees"):
        for _ in range(3):
            out = compiled(x.npu(), scale)
    assert_close_to_cpu(out, fn(x, scale))
    (line,) = _uncaptured_lines(caplog)
    assert "cpu tensors" in line and "torch.npu.graphs.capture_report" in line
    assert _stats()["records"] == 0


def test_graph_whose_capture_fails_runs_eagerly_with_one_log_line(caplog):
    def fn(x):
        return (x[x.nonzero(as_tuple=True)] * 2).sum() + x.sum()  # data-dependent shape

    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = torch.compile(fn, backend="npugraphs", fullgraph=True)
        with caplog.at_level(logging.WARNING, logger="torch_npu.compiler.graph_trees"):
            for _ in range(3):
                x = torch.tensor([0.0, 1.5, 0.0, -2.0])
                assert_close_to_cpu(compiled(x.npu()), fn(x))
    (line,) = _uncaptured_lines(caplog)
    assert "capture failed" in line and "capture_report" in line
    assert not torch.npu.is_current_stream_capturing()
    assert _stats()["records"] == 0


def test_compiled_call_inside_a_user_capture_is_recorded_by_it():
    def fn(x):
        return x.cos() + 1

    compiled = torch.compile(fn, backend="npugraphs")
    static_x = torch.randn(5, device="npu")
    for _ in range(3):
        compiled(static_x)  # warm-up, record, replay
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = compiled(static_x)
    for _ in range(2):
        new = torch.randn(5)
        static_x.copy_(new.npu())
        g.replay()
        assert_close_to_cpu(out, fn(new))


def test_options_are_rejected_at_first_call():
    compiled = torch.compile(lambda x: x + 1, backend="npugraphs", options={"foo": 1})
    with pytest.raises(Exception, match="takes no options"):
        compiled(torch.ones(2, device="npu"))


def test_modes_reduce_overhead_accepted_others_rejected():
    compiled = torch.compile(lambda x: x * 2, backend="npugraphs", mode="reduce-overhead")
    for _ in range(3):
        x = torch.randn(3)
        assert_close_to_cpu(compiled(x.npu()), x * 2)
    compiled = torch.compile(lambda x: x * 3, backend="npugraphs", mode="max-autotune")
    with pytest.raises(Exception, match="does not support mode"):
        compiled(torch.ones(2, device="npu"))


def _compile_and_record_one_graph(npu_model):
    """``npu_model`` compiled with npugraphs and called until it holds one recorded graph;
    returns the compiled model and the device-0 tree manager."""
    compiled = torch.compile(npu_model, backend="npugraphs")
    with torch.no_grad():
        for _ in range(3):
            compiled(torch.randn(2, 8, device="npu"))
    manager = _trees().get_manager(0)
    assert manager.num_graphs() == 1
    return compiled, manager


def test_reset_clears_the_trees_and_compiled_code_records_again():
    cpu_model, npu_model = _pair()
    compiled, manager = _compile_and_record_one_graph(npu_model)
    from torch_npu.compiler.backends import npugraphs as npugraphs_backend

    npugraphs_backend.reset()
    assert manager.num_graphs() == 0
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(2, 8)
            assert_close_to_cpu(compiled(x.npu()), cpu_model(x))
    assert manager.num_graphs() == 1


def test_torch_compiler_reset_reaches_the_trees():
    _, npu_model = _pair()
    _, manager = _compile_and_record_one_graph(npu_model)
    torch.compiler.reset()
    assert manager.num_graphs() == 0


def test_thousand_calls_leave_memory_allocated_unchanged():
    _, npu_model = _pair()
    compiled = torch.compile(npu_model, backend="npugraphs")
    x = torch.randn(4, 8, device="npu")
    with torch.no_grad():
        for _ in range(3):
            compiled(x)
        before = torch.npu.memory_allocated()
        for _ in range(1000):
            out = compiled(x)
        del out
        # The last output of the warm loop was alive when `before` was measured.
        assert torch.npu.memory_allocated() <= before


def test_dropped_compiled_code_releases_its_graph_memory_bookkeeping():
    import gc

    def fn(x):
        return x * 2 + 1

    compiled = torch.compile(fn, backend="npugraphs")
    for _ in range(3):
        compiled(torch.randn(4, device="npu"))
    manager = _trees().get_manager(0)
    assert manager._owned
    torch._dynamo.reset()  # drops the compiled code, hence its recorded graphs
    del compiled
    gc.collect()
    assert not manager._owned and manager.num_graphs() == 0


def test_waiting_activations_sibling_graph_within_a_step_moved_across_steps():
    cpu_model, npu_model = _pair(seed=7)
    compiled = torch.compile(npu_model, backend="npugraphs")
    x_cpu = torch.randn(4, 8)
    x = x_cpu.npu()
    for _ in range(2):  # warm-up, then record forward and backward
        compiled(x).sum().backward()
    npu_model.zero_grad(set_to_none=True)
    records = _stats()["records"]

    # One step, two forwards before their backwards: the second gets a sibling graph.
    l1, l2 = compiled(x).sum(), compiled(x * 2).sum()
    assert _stats()["records"] == records + 1
    # New steps: the forward's graph is reused; the waiting activations are moved first.
    torch_npu.npu.mark_step_begin()
    l3 = compiled(x * 3).sum()
    torch_npu.npu.mark_step_begin()
    l4 = compiled(x * 4).sum()
    forward_records = _stats()["records"]
    for loss in (l4, l3, l2, l1):
        loss.backward()
    for k in (1, 2, 3, 4):
        cpu_model(x_cpu * k).sum().backward()
    for p_cpu, p_npu in zip(cpu_model.parameters(), npu_model.parameters()):
        assert_close_to_cpu(p_npu.grad, p_cpu.grad, rtol=1e-5, atol=1e-5)
    assert forward_records == records + 1
