"""``Mish`` and ``SiLU`` (alias ``Swish``): the activations Ascend's detection and
classification model code imports from ``torch_npu.contrib.module.activations``."""
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Mish", "SiLU", "Swish"]


class Mish(nn.Module):
    """``x * tanh(softplus(x))`` (Misra, 2019), elementwise."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.mish(x)


class SiLU(nn.Module):
    """``x * sigmoid(x)``, elementwise, through ``torch_npu.npu_silu``."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        import torch_npu

        return torch_npu.npu_silu(x)


Swish = SiLU
