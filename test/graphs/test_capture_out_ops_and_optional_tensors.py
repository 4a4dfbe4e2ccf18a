"""Capture of ops that resize their out= argument, and of ops with absent optional tensors.

Regressions: an out= op whose output is resized during capture (``torch.arange(4)``
writes into an empty tensor) replayed into the buffer it had before the resize, so the
captured tensor held garbage; a convolution without bias (``F.conv2d(x, w, None)``, every
torchvision conv) or a convolution backward with a gradient masked out failed to capture
("Cannot access storage of UndefinedTensorImpl"), so graph backends ran CNNs eagerly.
"""
import copy

import pytest
import torch
import torch.nn.functional as F

from graphs_compare import assert_close_to_cpu


def _capture(fn, *args):
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = fn(*args)
    return g, out


@pytest.mark.parametrize("n", [4, 1000])
def test_arange_captured_on_device_holds_its_values_after_replay(n):
    g, out = _capture(lambda: torch.arange(n, device="npu"))
    # Poison the memory the graph writes, so a replay that writes elsewhere is seen.
    out.fill_(-7)
    g.replay()
    assert_close_to_cpu(out, torch.arange(n))


def test_position_ids_built_on_device_inside_a_capture():
    x_cpu = torch.randn(2, 6)
    x = x_cpu.npu()

    def fn(t):
        positions = torch.arange(t.shape[1], device=t.device).unsqueeze(0).expand_as(t)
        mask = torch.ones(t.shape[1], t.shape[1], device=t.device).tril()
        return t * positions + mask.sum(0)

    g, out = _capture(fn, x)
    out.zero_()
    for _ in range(2):
        new = torch.randn(2, 6)
        x.copy_(new.npu())
        g.replay()
        assert_close_to_cpu(out, fn(new))


def test_explicit_out_tensor_resized_during_capture():
    a_cpu, b_cpu = torch.randn(5), torch.randn(5)
    a, b = a_cpu.npu(), b_cpu.npu()
    out = torch.empty(0, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        torch.add(a, b, out=out)
    assert out.shape == (5,)
    g.replay()
    assert_close_to_cpu(out, a_cpu + b_cpu)


def test_conv2d_without_bias_is_captured_and_replayed():
    x_cpu, w_cpu = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    x, w = x_cpu.npu(), w_cpu.npu()
    g, out = _capture(lambda t: F.conv2d(t, w, None, padding=1), x)
    assert g.num_nodes() >= 1
    for _ in range(2):
        new = torch.randn(2, 3, 8, 8)
        x.copy_(new.npu())
        g.replay()
        assert_close_to_cpu(out, F.conv2d(new, w_cpu, None, padding=1), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mask", [(True, False, False), (False, True, False), (False, True, True)])
def test_conv_backward_with_masked_out_gradients_is_captured(mask):
    x_cpu, w_cpu = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)
    go_cpu = torch.randn(2, 4, 6, 6)
    args = dict(bias_sizes=[4], stride=[1, 1], padding=[1, 1], dilation=[1, 1], transposed=False,
                output_padding=[0, 0], groups=1, output_mask=list(mask))
    ref = torch.ops.aten.convolution_backward(go_cpu, x_cpu, w_cpu, **args)
    x, w, go = x_cpu.npu(), w_cpu.npu(), go_cpu.npu()
    g, outs = _capture(lambda: torch.ops.aten.convolution_backward(go, x, w, **args))
    g.replay()
    for wanted, got, expected in zip(mask, outs, ref):
        if wanted:
            assert_close_to_cpu(got, expected, atol=1e-4, rtol=1e-4)
        else:
            assert got is None and expected is None


class BiasFreeCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.fc = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def test_npugraphs_records_a_bias_free_cnn_in_training():
    from torch_npu.compiler import graph_trees

    torch.manual_seed(0)
    cpu_model = BiasFreeCNN()
    npu_model = copy.deepcopy(cpu_model).npu()
    compiled = torch.compile(npu_model, backend="npugraphs")
    # The input does not require grad: the conv backward runs with its input grad masked out.
    for _ in range(4):
        torch.npu.mark_step_begin()
        x = torch.randn(2, 3, 8, 8)
        compiled(x.npu()).sum().backward()
        cpu_model(x).sum().backward()
    for p_cpu, p_npu in zip(cpu_model.parameters(), npu_model.parameters()):
        assert_close_to_cpu(p_npu.grad, p_cpu.grad, atol=1e-4, rtol=1e-4)
    stats = graph_trees.get_manager(0).stats
    assert stats["records"] == 2 and stats["replays"] >= 4, stats  # forward and backward
    assert stats["eager_runs"] == 0, stats
