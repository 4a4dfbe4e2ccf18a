"""``dropout_with_byte_mask``: dropout whose keep mask is a uint8 (byte) tensor, as Ascend's
contrib functional API offers it (its device draws byte masks faster than bool ones).

In training, each element is kept with probability ``1 - p`` (the mask drawn from the npu
generator, so ``torch.manual_seed`` makes it reproducible) and the kept ones are scaled by
``1 / (1 - p)``; ``p = 1`` gives zeros. Outside training the input is returned as it is, as
``torch.nn.functional.dropout`` does. Ascend's version has no in-place form: ``inplace=True``
raises its ``ValueError``. The gradient is ``grad * mask / (1 - p)``.
"""
from __future__ import annotations

import torch

__all__ = ["dropout_with_byte_mask"]


def dropout_with_byte_mask(input1, p=0.5, training=True, inplace=False):
    """Dropout of ``input1`` with probability ``p`` through a byte mask.

    Args:
        input1 (Tensor): the input.
        p (float): probability of an element to be zeroed. Default 0.5.
        training (bool): apply dropout. Default True.
        inplace (bool): not supported (must be False).
    """
    if not isinstance(input1, torch.Tensor):
        raise TypeError(f"dropout_with_byte_mask: input1 must be a tensor, got {type(input1).__name__}")
    if p < 0. or p > 1.:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if inplace:
        raise ValueError("dropout probability has no-inplace computing. (dropout_with_byte_mask: pass inplace=False)")
    if not input1.is_floating_point():
        raise TypeError(f"dropout_with_byte_mask: input1 must be a floating point tensor, got {input1.dtype}")
    if not training or p == 0.:
        return input1
    if p == 1.:
        return input1 * torch.zeros((), dtype=input1.dtype, device=input1.device)
    mask = (torch.rand(input1.shape, device=input1.device) >= p).to(torch.uint8)
    return input1 * mask * (1.0 / (1.0 - p))
