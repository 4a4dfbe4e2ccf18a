"""NpuFusedAdamW: AdamW (decoupled weight decay) over combined buffers, torch.optim.AdamW's formula."""
from __future__ import annotations

from torch_npu.optim.npu_fused_adam import NpuFusedAdam

__all__ = ["NpuFusedAdamW"]


class NpuFusedAdamW(NpuFusedAdam):
    """AdamW (Loshchilov & Hutter); trains to the parameters ``torch.optim.AdamW`` gives."""

    _decoupled_weight_decay = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
