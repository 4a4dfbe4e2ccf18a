"""``npu_group_norm_silu``: GroupNorm followed by SiLU, as Ascend's diffusion UNets call it.

Formula (Ascend documentation): ``input (N, C, *)`` is split into ``group`` groups of
channels; per sample and group ``mean = E[x]``, ``rstd = 1 / sqrt(Var[x] + eps)`` (biased
variance); ``y = silu((x - mean) * rstd * weight + bias)`` with per-channel ``weight`` and
``bias`` (optional). Returns ``(y, mean, rstd)``, ``mean``/``rstd`` of shape ``(N, group)``,
all in ``input``'s dtype. Arithmetic is float32. Ascend defines no backward; under Inductor
it decomposes into this formula and fuses.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_group_norm_silu"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions


def _check_args(x, weight, bias, group, eps) -> None:
    op = "npu_group_norm_silu"
    check.tensor(op, "input", x)
    check.dtype(op, "input", x, check.FLOATING)
    if not 2 <= x.dim() <= 8:
        raise ValueError(f"{op}: input must have 2 to 8 dimensions, got shape {tuple(x.shape)}")
    if group <= 0 or x.shape[1] % group:
        raise ValueError(f"{op}: group={group} must be positive and divide input's channels ({x.shape[1]})")
    if eps <= 0:
        raise ValueError(f"{op}: eps={eps} must be positive")
    for name, value in (("weight", weight), ("bias", bias)):
        if value is not None:
            check.tensor(op, name, value)
            if tuple(value.shape) != (x.shape[1],):
                raise ValueError(f"{op}: {name} must have shape ({x.shape[1]},), got {tuple(value.shape)}")


def _group_norm_silu(input, weight, bias, group: int, eps: float = 1e-5):
    _check_args(input, weight, bias, group, eps)
    n, c = input.shape[:2]
    grouped = input.float().reshape(n, group, -1)
    mean = grouped.mean(dim=-1)
    rstd = torch.rsqrt(grouped.var(dim=-1, unbiased=False) + eps)
    normed = ((grouped - mean.unsqueeze(-1)) * rstd.unsqueeze(-1)).reshape(input.shape)
    channel_shape = [1, c] + [1] * (input.dim() - 2)
    if weight is not None:
        normed = normed * weight.float().reshape(channel_shape)
    if bias is not None:
        normed = normed + bias.float().reshape(channel_shape)
    return F.silu(normed).to(input.dtype), mean.to(input.dtype), rstd.to(input.dtype)


def _group_norm_silu_fake(input, weight, bias, group: int, eps: float = 1e-5):
    _check_args(input, weight, bias, group, eps)
    stats = (input.shape[0], group)
    return input.new_empty(input.shape), input.new_empty(stats), input.new_empty(stats)


_family.define(
    "npu_group_norm_silu(Tensor input, Tensor? weight, Tensor? bias, int group, float eps=1e-05) "
    "-> (Tensor, Tensor, Tensor)",
    kernel=_group_norm_silu, fake=_group_norm_silu_fake, decompose=True,
)

npu_group_norm_silu = torch.ops.npu.npu_group_norm_silu
