"""NpuFusedSGD: SGD with momentum over combined buffers, torch.optim.SGD's update formula."""
from __future__ import annotations

import math

import torch
from torch.optim import sgd as _torch_sgd
from torch.optim.optimizer import required

from torch_npu.optim._validation import check_non_negative
from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase
from torch_npu.utils.combine_tensors import npu_combine_tensors

__all__ = ["NpuFusedSGD"]


class NpuFusedSGD(NpuFusedOptimizerBase):
    """SGD with optional (Nesterov) momentum; trains to the parameters ``torch.optim.SGD`` gives."""

    _uses_step = False

    def __init__(self, params, lr=required, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        if lr is not required:
            check_non_negative("learning rate", lr)
        check_non_negative("momentum value", momentum)
        check_non_negative("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or not math.isclose(dampening, 0.0, abs_tol=1e-15)):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)

    def _init_param_state(self, state, param, group):
        # As torch.optim.SGD: the momentum buffer is born from the first step's grad.
        pass

    def _bucket_step(self, group, bucket):
        momentum_buffers = [bucket.states.get("momentum_buffer")]
        _torch_sgd.sgd(
            [bucket.param], [bucket.grad], momentum_buffers, foreach=False, fused=False,
            weight_decay=group["weight_decay"], momentum=group["momentum"], lr=group["lr"],
            dampening=group["dampening"], nesterov=group["nesterov"], maximize=False,
        )
        if group["momentum"] != 0 and "momentum_buffer" not in bucket.states:
            # The first step made one flat buffer: its slices become the per-parameter states.
            flat = momentum_buffers[0]
            views = [torch.empty_like(p) for p in bucket.params]
            for p, v in zip(bucket.params, views):
                self.state[p]["momentum_buffer"] = v
            combined = npu_combine_tensors(views, require_copy_value=False)
            combined.copy_(flat)
            bucket.states["momentum_buffer"] = combined
