"""``fuse_add_softmax_dropout``: BERT's ``dropout(softmax(attn_mask + attn_scores /
sqrt(attn_head_size)))``, as Ascend's contrib API offers it.

Ascend's version picks its path by shape, and so does this one, because the two paths
differ in where the dropout comes from:

* ``(N, C, H, W)`` scores with ``H`` in 128, 256, 384, 512 and ``N * C`` a multiple of 32:
  ``torch_npu.npu_dropout_with_add_softmax`` with drop probability ``p`` in training (0
  otherwise); the ``dropout`` module is not called.
* any other shape: the plain formula, then ``dropout(probs)`` (the module, which follows its
  own ``training`` flag and probability; ``training`` and ``p`` are not used).

The softmax is over the last dimension in both (``dim`` must name it; Ascend ignores it).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import torch_npu

__all__ = ["fuse_add_softmax_dropout"]

# The score widths Ascend's fused kernel takes (its other shapes go through the formula).
FUSED_HEIGHTS = (128, 256, 384, 512)


def fuse_add_softmax_dropout(training, dropout, attn_mask, attn_scores, attn_head_size, p=0.5, dim=-1):
    """The attention probabilities of ``attn_scores`` under ``attn_mask``.

    Args:
        training (bool): training mode (the fused path drops with ``p`` only then).
        dropout (nn.Module): the dropout layer of the formula path.
        attn_mask (Tensor): the additive mask, the shape of ``attn_scores``.
        attn_scores (Tensor): raw scores ``(N, C, H, W)``.
        attn_head_size (float): the head size; the scores are scaled by ``1 / sqrt`` of it.
        p (float): drop probability of the fused path.
        dim (int): the softmax dimension, the last one.

    Returns:
        Tensor: the attention probabilities after dropout.
    """
    op = "fuse_add_softmax_dropout"
    for name, value in (("attn_mask", attn_mask), ("attn_scores", attn_scores)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(value).__name__}")
    if attn_scores.dim() != 4:
        raise ValueError(f"{op}: attn_scores must be (N, C, H, W), got shape {tuple(attn_scores.shape)}")
    if dim not in (-1, 3):
        raise ValueError(f"{op}: dim={dim} is not supported; the softmax is over the last dimension (dim=-1)")
    if not attn_head_size > 0:
        raise ValueError(f"{op}: attn_head_size={attn_head_size} must be positive (scores are scaled by 1/sqrt of it)")
    alpha = 1 / math.sqrt(attn_head_size)
    n, c, h, _w = attn_scores.size()
    if h in FUSED_HEIGHTS and (n * c) % 32 == 0:
        if tuple(attn_mask.shape) != tuple(attn_scores.shape):
            raise ValueError(
                f"{op}: scores of shape {tuple(attn_scores.shape)} take the fused path (H in {FUSED_HEIGHTS}, "
                f"N * C a multiple of 32), which needs attn_mask of the same shape, got {tuple(attn_mask.shape)}; "
                "expand the mask first (attn_mask.expand_as(attn_scores))"
            )
        _mask, _probs, dropped = torch_npu.npu_dropout_with_add_softmax(
            attn_scores, attn_mask, alpha, p if training else 0., -1)
        return dropped
    probs = F.softmax(torch.add(attn_mask, attn_scores, alpha=alpha), dim=-1)
    return dropout(probs)
