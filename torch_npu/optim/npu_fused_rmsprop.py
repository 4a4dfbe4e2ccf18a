"""NpuFusedRMSprop: RMSprop over combined buffers, torch.optim.RMSprop's update formula."""
from __future__ import annotations

import torch
from torch.optim import rmsprop as _torch_rmsprop

from torch_npu.optim._validation import check_non_negative
from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedRMSprop"]


class NpuFusedRMSprop(NpuFusedOptimizerBase):
    """RMSprop (Hinton), optionally centered and with momentum; as ``torch.optim.RMSprop``."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False):
        check_non_negative("learning rate", lr)
        check_non_negative("epsilon value", eps)
        check_non_negative("momentum value", momentum)
        check_non_negative("weight_decay value", weight_decay)
        check_non_negative("alpha value", alpha)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered))

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)

    def _init_param_state(self, state, param, group):
        state["square_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        if group["momentum"] > 0:
            state["momentum_buffer"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        if group["centered"]:
            state["grad_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _bucket_step(self, group, bucket):
        _torch_rmsprop.rmsprop(
            [bucket.param], [bucket.grad], [bucket.states["square_avg"]],
            [bucket.states["grad_avg"]] if group["centered"] else [],
            [bucket.states["momentum_buffer"]] if group["momentum"] > 0 else [],
            [bucket.step], foreach=False, maximize=False, differentiable=False, capturable=False,
            lr=group["lr"], alpha=group["alpha"], eps=group["eps"], weight_decay=group["weight_decay"],
            momentum=group["momentum"], centered=group["centered"],
        )
