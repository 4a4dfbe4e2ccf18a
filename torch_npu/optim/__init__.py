"""torch_npu.optim: the fused optimizers of Ascend's torch_npu.

Each keeps the parameters, grads and states of a group in combined flat buffers (see
``npu_fused_optim_base``) and updates them with the formula of its torch.optim
counterpart, or with the published formula where torch has none (Lamb, AdamP, BertAdam,
RMSpropTF). Loaded only when imported.
"""
from torch_npu.optim.npu_fused_adadelta import NpuFusedAdadelta
from torch_npu.optim.npu_fused_adam import NpuFusedAdam
from torch_npu.optim.npu_fused_adamp import NpuFusedAdamP
from torch_npu.optim.npu_fused_adamw import NpuFusedAdamW
from torch_npu.optim.npu_fused_bert_adam import NpuFusedBertAdam
from torch_npu.optim.npu_fused_lamb import NpuFusedLamb
from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase
from torch_npu.optim.npu_fused_rmsprop import NpuFusedRMSprop
from torch_npu.optim.npu_fused_rmsprop_tf import NpuFusedRMSpropTF
from torch_npu.optim.npu_fused_sgd import NpuFusedSGD

__all__ = [
    "NpuFusedAdadelta", "NpuFusedAdam", "NpuFusedAdamP", "NpuFusedAdamW", "NpuFusedBertAdam", "NpuFusedLamb",
    "NpuFusedOptimizerBase", "NpuFusedRMSprop", "NpuFusedRMSpropTF", "NpuFusedSGD",
]
