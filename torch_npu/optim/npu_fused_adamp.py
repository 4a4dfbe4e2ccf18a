"""NpuFusedAdamP: AdamP (Heo et al., "AdamP: Slowing Down the Slowdown for Momentum Optimizers on
Scale-invariant Weights", ICLR 2021) over combined buffers.

torch.optim has no AdamP. The Adam moments and the bias-corrected direction are computed
over the combined buffers; then, for each parameter of more than one dimension, the
direction is projected onto the tangent space of the weight when the weight looks
scale-invariant (the largest |cosine| between grad and weight, per output channel and
then over the whole layer, is below ``delta / sqrt(fan)``), and that parameter's weight
decay is scaled by ``wd_ratio``. Weight decay is decoupled (``p *= 1 - lr * wd * ratio``).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from torch_npu.optim._validation import check_betas, check_non_negative
from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedAdamP"]


def _channel_view(x):
    return x.reshape(x.size(0), -1)


def _layer_view(x):
    return x.reshape(1, -1)


def _project(param, grad, direction, delta, wd_ratio, eps):
    """(direction, weight-decay factor) of one parameter after AdamP's projection."""
    for view in (_channel_view, _layer_view):
        cosine = F.cosine_similarity(view(grad), view(param), dim=1, eps=eps).abs_()
        if cosine.max() < delta / math.sqrt(view(param).size(1)):
            expand = [-1] + [1] * (param.dim() - 1)
            unit = param / view(param).norm(dim=1).view(expand).add_(eps)
            direction = direction - unit * view(unit * direction).sum(dim=1).view(expand)
            return direction, wd_ratio
    return direction, 1.0


class NpuFusedAdamP(NpuFusedOptimizerBase):
    """AdamP; ``nesterov=True`` uses the Nesterov form of the first moment in the direction."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, delta=0.1, wd_ratio=0.1,
                 nesterov=False):
        check_non_negative("learning rate", lr)
        check_non_negative("epsilon value", eps)
        check_betas(betas)
        check_non_negative("weight_decay value", weight_decay)
        check_non_negative("delta", delta)
        check_non_negative("wd_ratio", wd_ratio)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, delta=delta,
                                      wd_ratio=wd_ratio, nesterov=nesterov))

    def _init_param_state(self, state, param, group):
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _bucket_step(self, group, bucket):
        beta1, beta2 = group["betas"]
        lr, eps = group["lr"], group["eps"]
        bucket.step += 1
        step = float(bucket.step)
        grad = bucket.grad
        exp_avg, exp_avg_sq = bucket.states["exp_avg"], bucket.states["exp_avg_sq"]
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2 ** step)).add_(eps)
        step_size = lr / (1 - beta1 ** step)
        if group["nesterov"]:
            direction = (beta1 * exp_avg + (1 - beta1) * grad) / denom
        else:
            direction = exp_avg / denom
        offset = 0
        for p, p_grad in zip(bucket.params, bucket.views("grad")):
            n = p.numel()
            ratio = 1.0
            if p.dim() > 1:
                d = direction[offset:offset + n].view_as(p)
                projected, ratio = _project(p, p_grad, d, group["delta"], group["wd_ratio"], eps)
                d.copy_(projected)
            if group["weight_decay"] > 0:
                p.mul_(1 - lr * group["weight_decay"] * ratio)
            offset += n
        bucket.param.add_(direction, alpha=-step_size)
