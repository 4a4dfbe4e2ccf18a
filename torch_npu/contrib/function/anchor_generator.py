"""``npu_single_level_responsible_flags``: which anchors of one feature map are responsible
for a ground-truth box (YOLOv3's target assignment), as Ascend's contrib API offers it.

The anchors of the feature-map cell that holds a gt box's centre (``floor(centre / stride)``)
are flagged; the answer is ``featmap_size[0] * featmap_size[1] * num_base_anchors`` uint8
flags, cell-major. The work is ``torch_npu.npu_anchor_response_flags``; this module adds
Ascend's argument handling (boxes cast to float32 by ``box_dtype_check``).
"""
from __future__ import annotations

import torch

import torch_npu
from torch_npu.contrib.function._box_dtype import to_float32_boxes

__all__ = ["npu_single_level_responsible_flags"]


def box_dtype_check(box):
    """``box`` as float32, the dtype Ascend's contrib box helpers hand to the operators
    (see ``_box_dtype``: half boxes are cast too)."""
    return to_float32_boxes("box_dtype_check", "box", box)


def npu_single_level_responsible_flags(featmap_size, gt_bboxes, stride, num_base_anchors):
    """The responsible flags of the anchors of a single feature map.

    Args:
        featmap_size (tuple[int]): (height, width) of the feature map.
        gt_bboxes (Tensor): ground-truth boxes ``(n, 4)`` as ``[x1, y1, x2, y2]``.
        stride (tuple[int]): (x, y) stride of this level.
        num_base_anchors (int): anchors per cell.

    Returns:
        Tensor: uint8 flags, shape ``(featmap_size[0] * featmap_size[1] * num_base_anchors,)``.
    """
    op = "npu_single_level_responsible_flags"
    gt_bboxes = to_float32_boxes(op, "gt_bboxes", gt_bboxes)
    return torch_npu.npu_anchor_response_flags(gt_bboxes, list(featmap_size), list(stride), int(num_base_anchors))
