"""NpuFusedAdam: Adam over combined buffers, with torch.optim.Adam's update formula."""
from __future__ import annotations

import torch
from torch.optim import adam as _torch_adam

from torch_npu.optim._validation import check_betas, check_non_negative
from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedAdam"]


class NpuFusedAdam(NpuFusedOptimizerBase):
    """Adam (Kingma & Ba) with L2 weight decay; trains to the parameters ``torch.optim.Adam`` gives."""

    _decoupled_weight_decay = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False):
        check_non_negative("learning rate", lr)
        check_non_negative("epsilon value", eps)
        check_betas(betas)
        check_non_negative("weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)

    def _init_param_state(self, state, param, group):
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _bucket_step(self, group, bucket):
        beta1, beta2 = group["betas"]
        _torch_adam.adam(
            [bucket.param], [bucket.grad], [bucket.states["exp_avg"]], [bucket.states["exp_avg_sq"]],
            [bucket.states["max_exp_avg_sq"]] if group["amsgrad"] else [], [bucket.step],
            foreach=False, capturable=False, differentiable=False, fused=False,
            decoupled_weight_decay=self._decoupled_weight_decay,
            amsgrad=group["amsgrad"], beta1=beta1, beta2=beta2, lr=group["lr"],
            weight_decay=group["weight_decay"], eps=group["eps"], maximize=False,
        )
