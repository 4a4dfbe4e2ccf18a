"""The box coders of Ascend's contrib API: mmdetection's ``DeltaXYWHBBoxCoder`` (encode
``xyxy -> deltas``, decode ``deltas -> xyxy``) and ``YOLOBBoxCoder`` (encode), each over the
top-level box operator Ascend's version calls.

* ``npu_bbox_coder_encode_xyxy2xywh``: ``torch_npu.npu_bounding_box_encode`` with the
  ``means``/``stds`` lists spread out (defaults ``[0]*4`` and ``[1]*4``). Normalised
  coordinates (``is_normalized=True``) are first scaled back by ``normalized_scale``: the
  coder's ``+1`` box widths only make sense in pixels.
* ``npu_bbox_coder_decode_xywh2xyxy``: ``torch_npu.npu_bounding_box_decode``; ``max_shape``
  (``(height, width)``, default ``[9999, 9999]``, unlimited) clamps the boxes, and
  ``wh_ratio_clip`` bounds ``|dw|, |dh|`` by ``|log(wh_ratio_clip)|``.
* ``npu_bbox_coder_encode_yolo``: ``torch_npu.npu_yolo_boxes_encode`` with the per-box
  ``stride`` cast to int32, as Ascend does.

The boxes are cast to float32 first (Ascend's dtype rule, ``_box_dtype``), so results are
float32. Both inputs must hold the same number of boxes, 4 coordinates each; Ascend's
``ValueError`` messages are kept.
"""
from __future__ import annotations

import torch

import torch_npu
from torch_npu.contrib.function._box_dtype import to_float32_boxes

__all__ = ["npu_bbox_coder_encode_yolo", "npu_bbox_coder_decode_xywh2xyxy", "npu_bbox_coder_encode_xyxy2xywh"]


def _check_pair(op: str, first_name: str, first, second_name: str, second) -> None:
    for name, value in ((first_name, first), (second_name, second)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{op}: {name} must be a tensor of boxes, got {type(value).__name__}")
        if value.dim() != 2:
            raise ValueError(f"{op}: {name} must have shape (n, 4), got {tuple(value.shape)}")
    if first.size(0) != second.size(0):
        raise ValueError(
            f"Expected {first_name}.size(0) == {second_name}.size(0) ({op}: got {first.size(0)} and "
            f"{second.size(0)} boxes; they are paired row by row)"
        )
    if not first.size(-1) == second.size(-1) == 4:
        raise ValueError(
            f"Expected {first_name}.size(-1) == {second_name}.size(-1) == 4 ({op}: got {first.size(-1)} and "
            f"{second.size(-1)} coordinates per box)"
        )


def _four(op: str, name: str, values) -> list[float]:
    values = [float(v) for v in values]
    if len(values) != 4:
        raise ValueError(f"{op}: {name} must have 4 entries (one per delta x, y, w, h), got {len(values)}")
    return values


def npu_bbox_coder_encode_yolo(bboxes, gt_bboxes, stride):
    """The YOLO regression targets that turn ``bboxes`` (anchors) into ``gt_bboxes``.

    Args:
        bboxes (Tensor): source boxes ``(n, 4)``.
        gt_bboxes (Tensor): target boxes ``(n, 4)``.
        stride (Tensor): the stride of each box, ``(n,)`` (cast to int32).

    Returns:
        Tensor: ``(n, 4)`` float32 deltas.
    """
    op = "npu_bbox_coder_encode_yolo"
    _check_pair(op, "bboxes", bboxes, "gt_bboxes", gt_bboxes)
    if not isinstance(stride, torch.Tensor):
        raise TypeError(f"{op}: stride must be a tensor with one stride per box, got {type(stride).__name__}")
    bboxes = to_float32_boxes(op, "bboxes", bboxes)
    gt_bboxes = to_float32_boxes(op, "gt_bboxes", gt_bboxes)
    return torch_npu.npu_yolo_boxes_encode(bboxes, gt_bboxes, stride.int())


def npu_bbox_coder_encode_xyxy2xywh(bboxes, gt_bboxes, means=None, stds=None, is_normalized=False,
                                    normalized_scale=10000.):
    """The deltas ``(dx, dy, dw, dh)`` that turn ``bboxes`` into ``gt_bboxes``, normalised by
    ``means`` and ``stds``.

    Args:
        bboxes (Tensor): source boxes ``(n, 4)`` as ``[x1, y1, x2, y2]``.
        gt_bboxes (Tensor): target boxes ``(n, 4)``.
        means, stds (list[float]): the deltas' normalisation (default 0 and 1).
        is_normalized (bool): the coordinates are fractions; multiply by ``normalized_scale``.
        normalized_scale (float): the scale that restores pixel coordinates.

    Returns:
        Tensor: ``(n, 4)`` float32 deltas.
    """
    op = "npu_bbox_coder_encode_xyxy2xywh"
    means = _four(op, "means", [0., 0., 0., 0.] if means is None else means)
    stds = _four(op, "stds", [1., 1., 1., 1.] if stds is None else stds)
    _check_pair(op, "bboxes", bboxes, "gt_bboxes", gt_bboxes)
    bboxes = to_float32_boxes(op, "bboxes", bboxes)
    gt_bboxes = to_float32_boxes(op, "gt_bboxes", gt_bboxes)
    if is_normalized:
        bboxes = bboxes * normalized_scale
        gt_bboxes = gt_bboxes * normalized_scale
    return torch_npu.npu_bounding_box_encode(bboxes, gt_bboxes, *means, *stds)


def npu_bbox_coder_decode_xywh2xyxy(bboxes, pred_bboxes, means=None, stds=None, max_shape=None,
                                    wh_ratio_clip=16 / 1000):
    """The boxes ``[x1, y1, x2, y2]`` that the deltas ``pred_bboxes`` make of ``bboxes``.

    Args:
        bboxes (Tensor): base boxes ``(n, 4)``.
        pred_bboxes (Tensor): encoded deltas ``(n, 4)``.
        means, stds (list[float]): the deltas' normalisation, as given to the encoder.
        max_shape (tuple[int]): ``(height, width)`` the boxes are clamped to (default
            ``[9999, 9999]``).
        wh_ratio_clip (float): bound of the width/height change, ``|dw| <= |log(clip)|``.

    Returns:
        Tensor: ``(n, 4)`` float32 boxes.
    """
    op = "npu_bbox_coder_decode_xywh2xyxy"
    means = _four(op, "means", [0., 0., 0., 0.] if means is None else means)
    stds = _four(op, "stds", [1., 1., 1., 1.] if stds is None else stds)
    max_shape = [9999, 9999] if max_shape is None else [int(s) for s in max_shape]
    if len(max_shape) != 2:
        raise ValueError(f"{op}: max_shape must be (height, width), two numbers, got {max_shape}")
    _check_pair(op, "bboxes", bboxes, "pred_bboxes", pred_bboxes)
    bboxes = to_float32_boxes(op, "bboxes", bboxes)
    pred_bboxes = to_float32_boxes(op, "pred_bboxes", pred_bboxes)
    return torch_npu.npu_bounding_box_decode(bboxes, pred_bboxes, *means, *stds, max_shape, float(wh_ratio_clip))
