"""Ascend's contributed layers and helpers (``torch_npu.contrib``).

``torch_npu.contrib.transfer_to_npu`` runs CUDA scripts on npu; it is opt-in: importing
``torch_npu.contrib`` does not apply it.

``torch_npu.contrib.module`` holds the model-zoo layers; the listing's names are re-exported
here, as model code imports them from either place.
"""

# --- torch_npu.contrib.module: the layers re-exported at this level -------------------------
from .module import (  # noqa: E402
    BiLSTM,
    ChannelShuffle,
    Focus,
    LabelSmoothingCrossEntropy,
    LinearA8W8Quant,
    LinearQuant,
    LinearWeightQuant,
    Mish,
    ModulatedDeformConv,
    MultiheadAttention,
    NpuCachedDropout,
    NpuDropPath,
    NpuFairseqDropout,
    PSROIPool,
    Prefetcher,
    ROIAlign,
    SiLU,
)
# --- end of the torch_npu.contrib.module block ---------------------------------------------
