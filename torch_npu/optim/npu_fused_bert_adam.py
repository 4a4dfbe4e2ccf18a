"""NpuFusedBertAdam: the BERT reference implementation's Adam variant over combined buffers.

torch.optim has no BertAdam. This is the optimizer of Google's BERT release as carried into
PyTorch by NVIDIA's BERT example: Adam moments without bias correction, L2 weight decay
added to the update (``m / (sqrt(v) + e) + weight_decay * p``), each parameter's grad
clipped to ``max_grad_norm`` first (when > 0), and the learning rate scaled by a warm-up
schedule of the progress ``step / t_total`` when ``t_total`` is set.
"""
from __future__ import annotations

import math

import torch
from torch.optim.optimizer import required

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedBertAdam"]


def warmup_cosine(x, warmup=0.002):
    return x / warmup if x < warmup else 0.5 * (1.0 + math.cos(math.pi * x))


def warmup_constant(x, warmup=0.002):
    return x / warmup if x < warmup else 1.0


def warmup_linear(x, warmup=0.002):
    return x / warmup if x < warmup else max((x - 1.0) / (warmup - 1.0), 0.0)


def warmup_poly(x, warmup=0.002, degree=0.5):
    return x / warmup if x < warmup else (1.0 - x) ** degree


SCHEDULES = {
    "warmup_cosine": warmup_cosine,
    "warmup_constant": warmup_constant,
    "warmup_linear": warmup_linear,
    "warmup_poly": warmup_poly,
}


class NpuFusedBertAdam(NpuFusedOptimizerBase):
    """BertAdam (``b1``, ``b2``, ``e`` are Adam's betas and epsilon; ``warmup`` a fraction of ``t_total``)."""

    def __init__(self, params, lr=required, warmup=-1, t_total=-1, schedule="warmup_linear", b1=0.9, b2=0.999,
                 e=1e-6, weight_decay=0.01, max_grad_norm=1.0):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr} - should be >= 0.0")
        if schedule not in SCHEDULES:
            raise ValueError(f"Invalid schedule parameter: {schedule!r} (one of {sorted(SCHEDULES)})")
        if not 0.0 <= warmup < 1.0 and not warmup == -1:
            raise ValueError(f"Invalid warmup: {warmup} - should be in [0.0, 1.0[ or -1")
        if not 0.0 <= b1 < 1.0:
            raise ValueError(f"Invalid b1 parameter: {b1} - should be in [0.0, 1.0[")
        if not 0.0 <= b2 < 1.0:
            raise ValueError(f"Invalid b2 parameter: {b2} - should be in [0.0, 1.0[")
        if not e >= 0.0:
            raise ValueError(f"Invalid epsilon value: {e} - should be >= 0.0")
        super().__init__(params, dict(lr=lr, schedule=schedule, warmup=warmup, t_total=t_total, b1=b1, b2=b2, e=e,
                                      weight_decay=weight_decay, max_grad_norm=max_grad_norm))

    def _init_param_state(self, state, param, group):
        state["next_m"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["next_v"] = torch.zeros_like(param, memory_format=torch.preserve_format)

    def get_lr(self):
        """The scheduled learning rate of every parameter that has a state, as in the BERT release."""
        lrs = []
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    return [0]
                lrs.append(self._scheduled_lr(group, float(state["step"])))
        return lrs

    @staticmethod
    def _scheduled_lr(group, step):
        if group["t_total"] != -1:
            return group["lr"] * SCHEDULES[group["schedule"]](step / group["t_total"], group["warmup"])
        return group["lr"]

    def _bucket_step(self, group, bucket):
        grad = bucket.grad
        if group["max_grad_norm"] > 0:
            for g in bucket.views("grad"):
                norm = torch.linalg.vector_norm(g)
                g.mul_(torch.clamp(group["max_grad_norm"] / (norm + 1e-6), max=1.0))
        next_m, next_v = bucket.states["next_m"], bucket.states["next_v"]
        next_m.mul_(group["b1"]).add_(grad, alpha=1 - group["b1"])
        next_v.mul_(group["b2"]).addcmul_(grad, grad, value=1 - group["b2"])
        update = next_m / (next_v.sqrt() + group["e"])
        if group["weight_decay"] > 0.0:
            update.add_(bucket.param, alpha=group["weight_decay"])
        lr_scheduled = self._scheduled_lr(group, float(bucket.step))
        bucket.param.add_(update, alpha=-lr_scheduled)
        bucket.step += 1
