"""Ascend's contrib API: ready-made layers and functions for models ported to the npu, and
optional helpers that change how other code runs.

``torch_npu.contrib.transfer_to_npu`` runs CUDA scripts on npu; it is opt-in by importing it
(importing this package does not apply it).

``torch_npu.contrib.module`` holds the model-zoo layers and ``torch_npu.contrib.function``
the functions; the listing's names are re-exported here, as model code imports them from
either place.
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

# --- contrib functions (torch_npu.contrib.function), re-exported as Ascend does ----------------
from torch_npu.contrib.function import (
    fuse_add_softmax_dropout,
    matmul_transpose,
    npu_batched_multiclass_nms,
    npu_bbox_coder_decode_xywh2xyxy,
    npu_bbox_coder_encode_xyxy2xywh,
    npu_bbox_coder_encode_yolo,
    npu_fast_condition_index_put,
    npu_fused_attention,
    npu_fused_attention_with_layernorm,
    npu_multiclass_nms,
    npu_single_level_responsible_flags,
    roll,
)
from torch_npu.contrib.function import npu_ciou, npu_diou, npu_giou, npu_iou, npu_ptiou  # deprecated on Ascend

CONTRIB_FUNCTIONS = [
    "npu_multiclass_nms",
    "npu_batched_multiclass_nms",
    "npu_single_level_responsible_flags",
    "npu_fast_condition_index_put",
    "npu_bbox_coder_encode_yolo",
    "npu_bbox_coder_encode_xyxy2xywh",
    "npu_bbox_coder_decode_xywh2xyxy",
    "fuse_add_softmax_dropout",
    "roll",
    "matmul_transpose",
    "npu_fused_attention_with_layernorm",
    "npu_fused_attention",
]
# --- end of contrib functions ------------------------------------------------------------------
