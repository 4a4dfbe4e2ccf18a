"""NpuFusedRMSpropTF: RMSprop as TensorFlow defines it, over combined buffers.

torch.optim.RMSprop differs from TensorFlow's: TF starts the squared average at one,
adds ``eps`` inside the square root, and (by default) applies the learning rate inside
the momentum buffer. Models ported from TF (EfficientNet, MobileNet training recipes)
need that form. ``decoupled_decay=True`` decays the weights directly
(``p *= 1 - lr * weight_decay``) instead of adding ``weight_decay * p`` to the grad.
"""
from __future__ import annotations

import torch

from torch_npu.optim._validation import check_non_negative
from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedRMSpropTF"]


class NpuFusedRMSpropTF(NpuFusedOptimizerBase):
    """TensorFlow-style RMSprop (optionally centered, with momentum)."""

    def __init__(self, params, lr=1e-2, alpha=0.9, eps=1e-10, weight_decay=0, momentum=0.0, centered=False,
                 decoupled_decay=False, lr_in_momentum=True):
        check_non_negative("learning rate", lr)
        check_non_negative("epsilon value", eps)
        check_non_negative("momentum value", momentum)
        check_non_negative("weight_decay value", weight_decay)
        check_non_negative("alpha value", alpha)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, decoupled_decay=decoupled_decay,
                                      lr_in_momentum=lr_in_momentum))

    def _init_param_state(self, state, param, group):
        state["square_avg"] = torch.ones_like(param, memory_format=torch.preserve_format)
        if group["momentum"] > 0:
            state["momentum_buffer"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        if group["centered"]:
            state["grad_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _bucket_step(self, group, bucket):
        lr, alpha = group["lr"], group["alpha"]
        bucket.step += 1
        param, grad = bucket.param, bucket.grad
        if group["weight_decay"] != 0:
            if group["decoupled_decay"]:
                param.mul_(1.0 - lr * group["weight_decay"])
            else:
                grad = grad.add(param, alpha=group["weight_decay"])
        square_avg = bucket.states["square_avg"]
        square_avg.add_(grad.pow(2) - square_avg, alpha=1.0 - alpha)
        if group["centered"]:
            grad_avg = bucket.states["grad_avg"]
            grad_avg.add_(grad - grad_avg, alpha=1.0 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).add(group["eps"]).sqrt_()
        else:
            avg = square_avg.add(group["eps"]).sqrt_()
        if group["momentum"] > 0:
            buf = bucket.states["momentum_buffer"]
            if group["lr_in_momentum"]:
                buf.mul_(group["momentum"]).addcdiv_(grad, avg, value=lr)
                param.sub_(buf)
            else:
                buf.mul_(group["momentum"]).addcdiv_(grad, avg)
                param.add_(buf, alpha=-lr)
        else:
            param.addcdiv_(grad, avg, value=-lr)
