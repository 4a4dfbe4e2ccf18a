"""The layers of Ascend's model zoo (``torch_npu.contrib.module``), one module per concern.

Model code written for Ascend builds its networks from these classes (``ChannelShuffle`` of
ShuffleNet, ``Focus`` of YOLOv5, fairseq's ``MultiheadAttention``, the pre-generated dropouts,
the quantised linear and convolution layers, ...). Each is written here over the top-level
``torch_npu.npu_*`` operators or plain PyTorch, so that it runs on npu tensors, forward and
backward, with the real package's constructor signatures.
"""
from .activations import Mish, SiLU, Swish
from .bidirectional_lstm import BiLSTM
from .channel_shuffle import ChannelShuffle
from .crossentropy import LabelSmoothingCrossEntropy
from .deform_conv import ModulatedDeformConv
from .drop_path import NpuDropPath
from .ensemble_dropout import NpuCachedDropout, NpuFairseqDropout
from .focus import Focus
from .linear_a8w8_quant import LinearA8W8Quant
from .linear_quant import LinearQuant
from .linear_weight_quant import LinearWeightQuant
from .multihead_attention import MultiheadAttention
from .npu_modules import DropoutWithByteMask
from .prefetcher import Prefetcher
from .ps_roi_pooling import PSROIPool
from .quant_conv2d import QuantConv2d
from .roi_align import ROIAlign

__all__ = [
    "BiLSTM",
    "ChannelShuffle",
    "DropoutWithByteMask",
    "Focus",
    "LabelSmoothingCrossEntropy",
    "LinearA8W8Quant",
    "LinearQuant",
    "LinearWeightQuant",
    "Mish",
    "ModulatedDeformConv",
    "MultiheadAttention",
    "NpuCachedDropout",
    "NpuDropPath",
    "NpuFairseqDropout",
    "PSROIPool",
    "Prefetcher",
    "QuantConv2d",
    "ROIAlign",
    "SiLU",
    "Swish",
]
