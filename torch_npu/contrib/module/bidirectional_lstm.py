"""``BiLSTM``: a bidirectional LSTM made of two one-directional ones.

Ascend's fused LSTM runs one direction only, so its model zoo (CRNN) joins a forward LSTM and
a second one run over the time-reversed sequence. The real package marks it deprecated; it
warns the same way here.
"""
import warnings

import torch

__all__ = ["BiLSTM"]


class BiLSTM(torch.nn.Module):
    """Bidirectional LSTM over ``(seq_len, batch, input_size)``; returns
    ``(seq_len, batch, 2 * hidden_size)``: the forward direction's outputs, then the backward
    direction's (re-aligned in time), as ``nn.LSTM(bidirectional=True)`` lays them out."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        warnings.warn("torch_npu.contrib.BiLSTM is deprecated; torch.nn.LSTM(bidirectional=True) computes the same",
                      FutureWarning, stacklevel=2)
        self.fw_rnn = torch.nn.LSTM(input_size, hidden_size, bidirectional=False)
        self.bw_rnn = torch.nn.LSTM(input_size, hidden_size, bidirectional=False)

    def forward(self, inputs):
        if not isinstance(inputs, torch.Tensor) or inputs.dim() != 3:
            raise ValueError("BiLSTM: inputs must be a (seq_len, batch, input_size) Tensor, got "
                             f"{tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else type(inputs).__name__}")
        forward_out, _ = self.fw_rnn(inputs)
        backward_out, _ = self.bw_rnn(torch.flip(inputs, [0]))
        return torch.cat((forward_out, torch.flip(backward_out, [0])), 2)
