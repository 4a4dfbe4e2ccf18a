"""The packed int4 format of Ascend's quantisation operators: eight signed 4-bit values per int32.

PyTorch has no int4 dtype, so Ascend stores int4 tensors as int32 with the last dimension
divided by 8; value ``i`` of a word sits in bits ``4*i .. 4*i+3`` (lowest nibble first), in
two's complement. ``pack`` produces that layout from integer values in ``[-8, 7]`` and
``unpack`` reads it back.
"""
from __future__ import annotations

import torch

VALUES_PER_WORD = 8
MIN, MAX = -8, 7


def pack(values: torch.Tensor) -> torch.Tensor:
    """Integer ``values`` in [-8, 7], last dimension a multiple of 8 -> int32, last dim / 8."""
    *lead, last = values.shape
    nibbles = (values.to(torch.int64) & 0xF).reshape(*lead, last // VALUES_PER_WORD, VALUES_PER_WORD)
    shifts = torch.arange(0, 4 * VALUES_PER_WORD, 4, dtype=torch.int64, device=values.device)
    words = (nibbles << shifts).sum(dim=-1)
    # Reinterpret the unsigned 32-bit word as int32.
    words = torch.where(words >= 2**31, words - 2**32, words)
    return words.to(torch.int32)


def unpack(words: torch.Tensor) -> torch.Tensor:
    """int32 words -> int32 values in [-8, 7], last dimension times 8."""
    *lead, last = words.shape
    shifts = torch.arange(0, 4 * VALUES_PER_WORD, 4, dtype=torch.int64, device=words.device)
    nibbles = (words.to(torch.int64).unsqueeze(-1) >> shifts) & 0xF
    values = torch.where(nibbles >= 8, nibbles - 16, nibbles)
    return values.reshape(*lead, last * VALUES_PER_WORD).to(torch.int32)
