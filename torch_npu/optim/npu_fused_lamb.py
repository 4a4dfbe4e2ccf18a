"""NpuFusedLamb: LAMB (You et al., "Large Batch Optimization for Deep Learning") over combined buffers.

torch.optim has no LAMB. The update is the paper's layer-wise adaptive one in its
widely used form without bias correction (paper v3): an Adam direction
``m / (sqrt(v) + eps)`` (+ ``weight_decay * p``), scaled per parameter by the trust ratio
``min(||p||, 10) / ||direction||`` (1 where either norm is 0, or always with ``adam=True``).
The moments are updated over the combined buffers; the two norms are per parameter.
With ``use_global_grad_norm=True`` the group's grads are first divided by their joint L2
norm when it exceeds 1 (global gradient clipping to norm 1, as NVIDIA's fused LAMB does).
"""
from __future__ import annotations

import torch

from torch_npu.optim._validation import check_betas, check_non_negative
from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedLamb"]

WEIGHT_NORM_CEILING = 10.0


class NpuFusedLamb(NpuFusedOptimizerBase):
    """LAMB with L2 weight decay folded into the direction; ``adam=True`` fixes the trust ratio at 1."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, adam=False,
                 use_global_grad_norm=False):
        check_non_negative("learning rate", lr)
        check_non_negative("epsilon value", eps)
        check_betas(betas)
        check_non_negative("weight_decay value", weight_decay)
        self.adam = adam
        self.use_global_grad_norm = use_global_grad_norm
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    def _init_param_state(self, state, param, group):
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _before_group_step(self, group, buckets):
        self._grad_divisor = None
        if self.use_global_grad_norm and buckets:
            norms = [torch.linalg.vector_norm(b.grad.float()) for b in buckets]
            total = torch.linalg.vector_norm(torch.stack([n.to(norms[0].device) for n in norms]))
            self._grad_divisor = torch.clamp(total, min=1.0)

    def _bucket_step(self, group, bucket):
        beta1, beta2 = group["betas"]
        bucket.step += 1
        grad = bucket.grad
        if self._grad_divisor is not None:
            grad = grad / self._grad_divisor.to(grad.device, grad.dtype)
        exp_avg, exp_avg_sq = bucket.states["exp_avg"], bucket.states["exp_avg_sq"]
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        direction = exp_avg / exp_avg_sq.sqrt().add(group["eps"])
        if group["weight_decay"] != 0:
            direction.add_(bucket.param, alpha=group["weight_decay"])
        offset = 0
        for p in bucket.params:
            n = p.numel()
            d = direction[offset:offset + n]
            if self.adam:
                scale = -group["lr"]
                d.mul_(scale)
            else:
                w_norm = torch.linalg.vector_norm(bucket.param[offset:offset + n]).clamp(0, WEIGHT_NORM_CEILING)
                d_norm = torch.linalg.vector_norm(d)
                trust = torch.where((w_norm > 0) & (d_norm > 0), w_norm / d_norm, torch.ones_like(w_norm))
                d.mul_(trust * -group["lr"])
            offset += n
        bucket.param.add_(direction)
