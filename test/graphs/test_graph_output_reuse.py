"""Output objects of reduce-overhead graphs handed out again, as CUDA graph trees do.

A replay hands out the tensor objects of the last replay of that graph again when nobody
holds them or their memory any more; everything else (an output still held, a view of
one, a gradient a parameter keeps) must behave as if every replay made new tensors:
fresh autograd state, loud errors on overwritten memory, gradients not copied.
"""
import copy
import weakref

import pytest
import torch

import torch_npu
from graphs_compare import assert_close_to_cpu


def _manager():
    from torch_npu.compiler import graph_trees

    return graph_trees.get_manager(0)


def _recorded_graphs():
    return [g for fn in _manager()._functions for gs in fn._graphs.values() for g in gs]


def _moved_outputs():
    return sum(g.copies["outputs"] for g in _recorded_graphs())


def _warmed(fn, x):
    compiled = torch.compile(fn, mode="reduce-overhead")
    for _ in range(2):  # warm-up, record
        compiled(x)
    return compiled


def test_a_dropped_output_object_is_handed_out_again_with_new_values():
    compiled = _warmed(lambda x: x.sin() * 3 + 1, torch.randn(6, device="npu"))
    x = torch.randn(6)
    out = compiled(x.npu())
    last = weakref.ref(out)
    del out
    for k in range(3):
        y = x + k
        out = compiled(y.npu())
        assert last() is out  # the same object, not a new one per replay
        assert_close_to_cpu(out, y.sin() * 3 + 1)
        del out
    assert _manager().stats["replays"] == 4 and _moved_outputs() == 0


def test_an_output_still_held_is_not_handed_out_again():
    compiled = _warmed(lambda x: x.cos() - 2, torch.randn(4, device="npu"))
    x = torch.randn(4)
    first = compiled(x.npu())
    second = compiled((x + 1).npu())
    assert second is not first
    assert_close_to_cpu(second, (x + 1).cos() - 2)
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        first.cpu()


def test_a_view_of_a_dropped_output_keeps_its_memory_held():
    compiled = _warmed(lambda x: x * 5, torch.randn(8, device="npu"))
    x = torch.randn(8)
    view = compiled(x.npu())[2:]  # the output object itself is dropped at once
    assert_close_to_cpu(view, (x * 5)[2:])
    after = compiled((x - 1).npu())
    assert_close_to_cpu(after, (x - 1) * 5)
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        view.cpu()


def test_an_output_whose_storage_object_was_taken_is_still_reused():
    # untyped_storage() makes a Python object of the storage that the storage keeps: the
    # plan must not count it as somebody holding the memory.
    compiled = _warmed(lambda x: x + 7, torch.randn(3, device="npu"))
    x = torch.randn(3)
    out = compiled(x.npu())
    ptr = out.untyped_storage().data_ptr()
    last = weakref.ref(out)
    del out
    out = compiled(x.npu())
    assert last() is out and out.untyped_storage().data_ptr() == ptr
    assert_close_to_cpu(out, x + 7)


def test_a_reused_output_carries_nothing_from_its_last_run():
    compiled = _warmed(lambda x: x.exp(), torch.randn(5, device="npu"))
    x = torch.randn(5)
    out = compiled(x.npu())
    out.requires_grad_()
    out.register_hook(lambda g: g * 2)
    out.sum().backward()
    assert out.grad is not None
    last = weakref.ref(out)
    del out
    out = compiled(x.npu())
    assert last() is out
    assert not out.requires_grad and out.grad is None and out.grad_fn is None
    assert out._backward_hooks is None
    assert_close_to_cpu(out, x.exp())


def _pair(seed=0):
    torch.manual_seed(seed)
    cpu = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    return cpu, copy.deepcopy(cpu).npu()


def test_gradients_stay_on_graph_memory_instead_of_being_copied():
    cpu_model, npu_model = _pair()
    compiled = torch.compile(npu_model, mode="reduce-overhead")
    for step in range(5):
        torch_npu.npu.mark_step_begin()
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(step))
        for model in (cpu_model, npu_model):
            for p in model.parameters():
                p.grad = None
        cpu_model(x).square().mean().backward()
        compiled(x.npu()).square().mean().backward()
        for p_cpu, p_npu in zip(cpu_model.parameters(), npu_model.parameters()):
            assert_close_to_cpu(p_npu.grad, p_cpu.grad, atol=1e-5, rtol=1e-5)
    # AccumulateGrad took the backward graph's outputs as the gradients (the plan's own
    # reference to them does not count), as it takes a new tensor's.
    assert all(_manager().owns(p.grad) for p in npu_model.parameters())
    assert _manager().stats["replays"] >= 6 and _moved_outputs() == 0


def test_forwards_without_a_backward_do_not_keep_their_saved_tensors():
    # A forward under autograd whose output is dropped without a backward: the kept output
    # object must not keep that run's backward graph (and its saved tensors) alive.
    cpu_model, npu_model = _pair(1)
    compiled = torch.compile(npu_model, mode="reduce-overhead")
    x = torch.randn(4, 8)
    for _ in range(6):
        torch_npu.npu.mark_step_begin()
        out = compiled(x.npu())
        assert out.requires_grad
        assert_close_to_cpu(out, cpu_model(x))
        del out
    assert _manager().stats["replays"] >= 4
    assert _moved_outputs() == 0


def test_forwards_without_a_backward_replay_without_mark_step_begin():
    # Without mark_step_begin, activations still saved for a backward make the trees record
    # a sibling instead of overwriting them: a dropped output's history must not count.
    cpu_model, npu_model = _pair(2)
    compiled = torch.compile(npu_model, mode="reduce-overhead")
    x = torch.randn(4, 8)
    for _ in range(8):
        out = compiled(x.npu())
        assert_close_to_cpu(out, cpu_model(x))
        del out
    stats = _manager().stats
    assert stats["records"] == 1 and stats["replays"] == 6, stats
    assert _moved_outputs() == 0


def test_an_output_changed_in_place_by_its_last_holder_is_not_handed_out_again():
    compiled = _warmed(lambda x: x * 2 + 1, torch.randn(2, 3, device="npu"))
    x = torch.randn(2, 3)
    for change in (lambda t: t.t_(), lambda t: t.unsqueeze_(0), lambda t: t.resize_(4),
                   lambda t: t.set_(torch.zeros(6, device="npu"))):
        out = compiled(x.npu())
        change(out)
        last = weakref.ref(out)
        del out
        out = compiled(x.npu())
        assert out.shape == (2, 3) and out.stride() == (3, 1)
        assert last() is not out
        assert_close_to_cpu(out, x * 2 + 1)
        del out
