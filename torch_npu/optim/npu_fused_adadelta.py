"""NpuFusedAdadelta: Adadelta over combined buffers, torch.optim.Adadelta's update formula."""
from __future__ import annotations

import torch
from torch.optim import adadelta as _torch_adadelta

from torch_npu.optim._validation import check_non_negative
from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedAdadelta"]


class NpuFusedAdadelta(NpuFusedOptimizerBase):
    """Adadelta (Zeiler); trains to the parameters ``torch.optim.Adadelta`` gives."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0):
        check_non_negative("learning rate", lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho} (must be in [0, 1])")
        check_non_negative("epsilon value", eps)
        check_non_negative("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay))

    def _init_param_state(self, state, param, group):
        state["square_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["acc_delta"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def _bucket_step(self, group, bucket):
        _torch_adadelta.adadelta(
            [bucket.param], [bucket.grad], [bucket.states["square_avg"]], [bucket.states["acc_delta"]],
            [bucket.step], capturable=False, foreach=False, differentiable=False,
            lr=group["lr"], rho=group["rho"], eps=group["eps"], weight_decay=group["weight_decay"], maximize=False,
        )
