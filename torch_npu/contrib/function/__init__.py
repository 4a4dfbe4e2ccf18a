"""The functions of Ascend's contrib API (detection box helpers, attention pieces, roll,
dropout), one module per concern as Ascend lays them out, each written over plain PyTorch
and the top-level ``torch_npu`` operators Ascend's versions call.

``from torch_npu.contrib.function import npu_multiclass_nms`` works as on Ascend; the same
names are re-exported by ``torch_npu.contrib``.
"""
from torch_npu.contrib.function.anchor_generator import npu_single_level_responsible_flags
from torch_npu.contrib.function.bbox_coder import (
    npu_bbox_coder_decode_xywh2xyxy, npu_bbox_coder_encode_xyxy2xywh, npu_bbox_coder_encode_yolo,
)
from torch_npu.contrib.function.fuse_add_softmax_dropout import fuse_add_softmax_dropout
from torch_npu.contrib.function.fused_attention import npu_fused_attention, npu_fused_attention_with_layernorm
from torch_npu.contrib.function.index_op import npu_fast_condition_index_put
from torch_npu.contrib.function.iou import npu_ciou, npu_diou, npu_giou, npu_iou, npu_ptiou  # deprecated on Ascend
from torch_npu.contrib.function.matmul_transpose import matmul_transpose
from torch_npu.contrib.function.nms import npu_batched_multiclass_nms, npu_multiclass_nms
from torch_npu.contrib.function.npu_functional import dropout_with_byte_mask
from torch_npu.contrib.function.roll import roll

__all__ = [
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
    "npu_fused_attention",
    "npu_fused_attention_with_layernorm",
    "dropout_with_byte_mask",
]
