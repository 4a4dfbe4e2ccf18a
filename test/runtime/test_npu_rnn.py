"""nn.LSTM/GRU/RNN and their cells on npu, forward and backward, equal the cpu results
(npu routes them through the fused cell kernels, as CUDA does)."""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from npu_runtime_compare import seeded_generator


def _compare(module_cpu: nn.Module, inputs: tuple, name: str) -> None:
    torch.manual_seed(0)
    module_npu = copy.deepcopy(module_cpu).npu()
    cpu_in = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    npu_in = [t.detach().npu().requires_grad_(t.is_floating_point()) for t in inputs]
    out_c, out_n = module_cpu(*cpu_in), module_npu(*npu_in)
    flat_c = [t for t in torch.utils._pytree.tree_flatten(out_c)[0] if isinstance(t, torch.Tensor)]
    flat_n = [t for t in torch.utils._pytree.tree_flatten(out_n)[0] if isinstance(t, torch.Tensor)]
    gen = seeded_generator(name)
    weights = [torch.randn(t.shape, generator=gen) for t in flat_c]
    for c, n in zip(flat_c, flat_n):
        assert n.device.type == "npu"
        torch.testing.assert_close(n.detach().cpu(), c.detach(), rtol=1e-5, atol=1e-5)
    sum((c * w).sum() for c, w in zip(flat_c, weights)).backward()
    sum((n * w.npu()).sum() for n, w in zip(flat_n, weights)).backward()
    for c, n in zip(cpu_in, npu_in):
        torch.testing.assert_close(n.grad.cpu(), c.grad, rtol=1e-5, atol=1e-5)
    for (pname, pc), pn in zip(module_cpu.named_parameters(), module_npu.parameters()):
        torch.testing.assert_close(pn.grad.cpu(), pc.grad, rtol=1e-5, atol=1e-5, msg=pname)


def _seq(name: str, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=seeded_generator(name))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(
    "name, make",
    [
        ("lstm", lambda bias: nn.LSTM(4, 6, num_layers=2, bias=bias)),
        ("lstm_bidirectional_batch_first", lambda bias: nn.LSTM(4, 6, bidirectional=True, batch_first=True, bias=bias)),
        ("lstm_proj", lambda bias: nn.LSTM(4, 6, proj_size=3, bias=bias)),
        ("gru", lambda bias: nn.GRU(4, 6, num_layers=2, bias=bias)),
        ("gru_bidirectional", lambda bias: nn.GRU(4, 6, bidirectional=True, bias=bias)),
        ("rnn_tanh", lambda bias: nn.RNN(4, 6, bias=bias)),
        ("rnn_relu", lambda bias: nn.RNN(4, 6, nonlinearity="relu", bias=bias)),
    ],
)
def test_recurrent_layers(name, make, bias):
    torch.manual_seed(1)
    _compare(make(bias), (_seq(name, 5, 3, 4),), name)


@pytest.mark.parametrize(
    "name, make, states",
    [
        ("lstm_cell", lambda: nn.LSTMCell(4, 6), 2),
        ("gru_cell", lambda: nn.GRUCell(4, 6), 1),
        ("rnn_cell", lambda: nn.RNNCell(4, 6), 1),
    ],
)
def test_cells_with_given_states(name, make, states):
    torch.manual_seed(2)
    hidden = [_seq(f"{name}.h{i}", 3, 6) for i in range(states)]
    cell = make()
    if states == 2:
        wrapped = lambda x, h, c: cell(x, (h, c))  # noqa: E731
        module = _Wrap(cell, wrapped)
    else:
        module = cell
    _compare(module, (_seq(name, 3, 4), *hidden), name)


class _Wrap(nn.Module):
    def __init__(self, cell: nn.Module, fn):
        super().__init__()
        self.cell = cell
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)

    def __deepcopy__(self, memo):
        cell = copy.deepcopy(self.cell, memo)
        return _Wrap(cell, lambda x, h, c: cell(x, (h, c)))


def test_packed_sequence_lstm():
    torch.manual_seed(3)
    lstm = nn.LSTM(3, 4)
    seqs = [_seq("packed0", 5, 3), _seq("packed1", 2, 3)]
    packed = nn.utils.rnn.pack_sequence(seqs)
    out_c, _ = lstm(packed)
    lstm_n = copy.deepcopy(lstm).npu()
    out_n, _ = lstm_n(nn.utils.rnn.pack_sequence([s.npu() for s in seqs]))
    torch.testing.assert_close(out_n.data.cpu(), out_c.data, rtol=1e-5, atol=1e-5)
