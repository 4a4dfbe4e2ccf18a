"""Multi-class NMS as mmdetection's ``multiclass_nms`` is called on Ascend:
``npu_multiclass_nms`` (one image) and ``npu_batched_multiclass_nms`` (a batch), both over
``torch_npu.npu_batch_nms``, as Ascend's versions are.

Scores are ``(n, #class + 1)``: the last column is the background's and is dropped; with
``score_factors`` (``(n,)``) the class scores are multiplied by them first. Boxes are shared
by all classes (``(n, 4)``) or given per class (``(n, #class, 4)``). Per class, boxes scoring
above ``score_thr`` go through greedy NMS at IoU ``nms_thr``; the survivors of all classes,
by descending score, fill ``max_num`` slots, zero padded (Ascend allocates the output ahead,
so ``max_num=-1``, "keep all", is refused). The work runs in float16, as on Ascend (boxes and
scores are cast with ``.half()``).

Returns ``(dets, labels)``: ``dets`` is ``(max_num, 5)`` (``(bs, max_num, 5)`` batched) rows
``[x1, y1, x2, y2, score]`` and ``labels`` the 0-based class of each row, ``(max_num,)``
(``(bs, max_num)``), float16 like the scores.
"""
from __future__ import annotations

import torch

import torch_npu

__all__ = ["npu_multiclass_nms", "npu_batched_multiclass_nms"]


def _checked(op: str, multi_bboxes, multi_scores, max_num, score_factors, batched: bool):
    lead = "(bs, n, " if batched else "(n, "
    for name, value in (("multi_bboxes", multi_bboxes), ("multi_scores", multi_scores)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(value).__name__}")
    if multi_scores.dim() != (3 if batched else 2) or multi_scores.shape[-1] < 2:
        raise ValueError(
            f"{op}: multi_scores must have shape {lead}#class + 1) (the last column is the background's), "
            f"got {tuple(multi_scores.shape)}"
        )
    lead_shape = tuple(multi_scores.shape[:-1])
    classes = multi_scores.shape[-1] - 1
    box_shapes = (lead_shape + (4,), lead_shape + (classes, 4), lead_shape + (1, 4))
    if tuple(multi_bboxes.shape) not in box_shapes:
        raise ValueError(
            f"{op}: multi_bboxes must have shape {lead}4) or {lead}#class, 4) = {box_shapes[0]} or "
            f"{box_shapes[1]} for these scores, got {tuple(multi_bboxes.shape)}"
        )
    if isinstance(max_num, bool) or not isinstance(max_num, int) or max_num <= 0:
        raise ValueError(
            f"{op}: max_num={max_num!r} must be a positive int: the output is allocated ahead with "
            "max_num rows, so -1 (keep all) is not supported"
        )
    if score_factors is not None:
        if not isinstance(score_factors, torch.Tensor) or tuple(score_factors.shape) != lead_shape:
            got = tuple(score_factors.shape) if isinstance(score_factors, torch.Tensor) else type(score_factors).__name__
            raise ValueError(f"{op}: score_factors must have shape {lead_shape}, one factor per box, got {got}")
    return classes


def _class_scores(multi_scores, score_factors):
    scores = multi_scores[..., :-1]
    if score_factors is not None:
        scores = scores * score_factors[..., None]
    return scores


def npu_multiclass_nms(multi_bboxes, multi_scores, score_thr=0.05, nms_thr=0.45, max_num=50, score_factors=None):
    """NMS over the classes of one image's boxes.

    Args:
        multi_bboxes (Tensor): ``(n, #class, 4)`` or ``(n, 4)``.
        multi_scores (Tensor): ``(n, #class + 1)``, the last column the background's (ignored).
        score_thr (float): boxes scoring at or below it are not considered.
        nms_thr (float): the IoU above which a box is suppressed.
        max_num (int): rows of the output; the survivors beyond it are dropped, missing ones
            are zero.
        score_factors (Tensor): ``(n,)`` factors the scores are multiplied by first.

    Returns:
        tuple: ``(dets (max_num, 5), labels (max_num,))``, labels 0-based.
    """
    op = "npu_multiclass_nms"
    classes = _checked(op, multi_bboxes, multi_scores, max_num, score_factors, batched=False)
    num_boxes = multi_scores.size(0)
    scores = _class_scores(multi_scores, score_factors).reshape(1, num_boxes, classes)
    boxes = multi_bboxes.reshape(1, num_boxes, multi_bboxes.numel() // 4 // max(num_boxes, 1), 4)
    nmsed_boxes, nmsed_scores, nmsed_classes, _num = torch_npu.npu_batch_nms(
        boxes.half(), scores.half(), score_thr, nms_thr, max_num, max_num)
    return torch.cat([nmsed_boxes[0], nmsed_scores[0][:, None]], -1), nmsed_classes[0]


def npu_batched_multiclass_nms(multi_bboxes, multi_scores, score_thr=0.05, nms_thr=0.45, max_num=50,
                               score_factors=None):
    """``npu_multiclass_nms`` for each image of a batch.

    Args:
        multi_bboxes (Tensor): ``(bs, n, #class, 4)`` or ``(bs, n, 4)``.
        multi_scores (Tensor): ``(bs, n, #class + 1)``.
        score_thr, nms_thr, max_num: as for ``npu_multiclass_nms``.
        score_factors (Tensor): ``(bs, n)``.

    Returns:
        tuple: ``(dets (bs, max_num, 5), labels (bs, max_num))``, labels 0-based.
    """
    op = "npu_batched_multiclass_nms"
    classes = _checked(op, multi_bboxes, multi_scores, max_num, score_factors, batched=True)
    batch_size, num_boxes = multi_scores.shape[:2]
    scores = _class_scores(multi_scores, score_factors).reshape(batch_size, num_boxes, classes)
    per_box = multi_bboxes.numel() // 4 // max(num_boxes * batch_size, 1)
    boxes = multi_bboxes.reshape(batch_size, num_boxes, per_box, 4)
    nmsed_boxes, nmsed_scores, nmsed_classes, _num = torch_npu.npu_batch_nms(
        boxes.half(), scores.half(), score_thr, nms_thr, max_num, max_num)
    return torch.cat([nmsed_boxes, nmsed_scores[..., None]], -1), nmsed_classes
