"""Attention written out in plain PyTorch from the Ascend documentation, for the op tests.

softmax(scale * (q k^T + pse) masked) v per head, with every mask built as an explicit
[B, N, Sq, Skv] boolean tensor from the documented sparse-mode pictures, computed in float64.
It shares no code with the operators it checks: the layout conversions here are written
independently too.
"""
from __future__ import annotations

import torch


def to_bnsd(t: torch.Tensor, layout: str, heads: int) -> torch.Tensor:
    """[B, N, S, D] copy of t given in `layout` (TND gives [1, N, T, D])."""
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.permute(0, 2, 1, 3)
    if layout == "BSH":
        b, s, h = t.shape
        return t.reshape(b, s, heads, h // heads).permute(0, 2, 1, 3)
    if layout == "SBH":
        s, b, h = t.shape
        return t.reshape(s, b, heads, h // heads).permute(1, 2, 0, 3)
    if layout == "TND":
        return t.permute(1, 0, 2).unsqueeze(0)
    raise ValueError(layout)


def from_bnsd(t: torch.Tensor, layout: str) -> torch.Tensor:
    b, n, s, d = t.shape
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.permute(0, 2, 1, 3)
    if layout == "BSH":
        return t.permute(0, 2, 1, 3).reshape(b, s, n * d)
    if layout == "SBH":
        return t.permute(2, 0, 1, 3).reshape(s, b, n * d)
    if layout == "TND":
        return t[0].permute(1, 0, 2)
    raise ValueError(layout)


def band_mask(sq: int, skv: int, sparse_mode: int, pre: int, nxt: int) -> torch.Tensor:
    """[Sq, Skv] bool, True = masked, as the Ascend sparse-mode diagrams show."""
    i = torch.arange(sq).view(sq, 1)
    j = torch.arange(skv).view(1, skv)
    if sparse_mode == 0:      # defaultMask: pre/next tokens from the top-left corner
        return (j - i > nxt) | (i - j > pre)
    if sparse_mode == 1:      # allMask: only the explicit mask
        return torch.zeros(sq, skv, dtype=torch.bool)
    if sparse_mode == 2:      # leftUpCausal
        return j > i
    if sparse_mode == 3:      # rightDownCausal
        return j > i + (skv - sq)
    if sparse_mode == 4:      # band, from the bottom-right corner
        d = j - i - (skv - sq)
        return (d > nxt) | (d < -pre)
    raise ValueError(sparse_mode)


def attention(q, k, v, scale, *, mask=None, pse=None, pse_scale=None, keep=None, sink=None):
    """q [B, N1, Sq, D], k/v [B, N2, Skv, D]; mask broadcastable bool (True = masked);
    pse additive, multiplied by `pse_scale` (Ascend: scale * (qk + pse)); keep: dropout
    multipliers (0 or 1/keep_prob) [B, N1, Sq, Skv]; sink: [N1] extra logit per head.
    Returns float64 output; rows with nothing to attend give 0."""
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = (q @ k.transpose(-1, -2)) * scale
    if pse is not None:
        s = s + pse.double() * (scale if pse_scale is None else pse_scale)
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    if sink is not None:
        b, n, sq, _ = s.shape
        s = torch.cat([s, sink.double().view(1, n, 1, 1).expand(b, n, sq, 1)], dim=-1)
    p = torch.softmax(s, dim=-1)
    p = torch.nan_to_num(p, nan=0.0)
    if sink is not None:
        p = p[..., :-1]
    if keep is not None:
        p = p * keep.double()
    return p @ v


def softmax_stats(q, k, scale, *, mask=None, pse=None):
    """Row max and row sum of exp(s - max) of the masked scaled scores, [B, N1, Sq]."""
    q, k = q.double(), k.double()
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    s = (q @ k.transpose(-1, -2)) * scale
    if pse is not None:
        s = s + pse.double() * scale
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    m = s.amax(dim=-1)
    return m, torch.exp(s - m.unsqueeze(-1)).sum(dim=-1)
