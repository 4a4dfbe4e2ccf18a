"""Non-maximum suppression as Ascend detection code calls it: ``npu_nms_v4``,
``npu_nms_with_mask`` and ``npu_batch_nms``.

All three are greedy NMS (Ascend documentation): a box is kept unless an already kept box
overlaps it with an IoU above ``iou_threshold``; overlaps are plain IoU of ``[x1, y1, x2, y2]``
boxes (corner order within a box does not matter).

* ``npu_nms_v4(boxes (N, 4), scores (N,), max_output_size, iou_threshold, scores_threshold,
  pad_to_max_output_size)``: boxes scoring above ``scores_threshold`` (0-d tensors, as on
  Ascend) are visited by descending score; returns the kept indices (int32, in that order,
  as a ``(max_output_size,)`` tensor whose tail after the ``valid_outputs`` entries is 0) and
  ``valid_outputs`` (0-d int32).
* ``npu_nms_with_mask(input (N, 8) or (N, 5), iou_threshold)``: rows are
  ``[x1, y1, x2, y2, score, ...]`` already sorted by descending score (as Ascend's callers
  pass them); returns the ``(N, 5)`` boxes with scores, their indices (int32) and a uint8 keep
  mask, in input order.
* ``npu_batch_nms(boxes (B, N, q, 4), scores (B, N, C), ...)``: per image and class (``q`` is
  1, shared boxes, or ``C``), boxes above ``score_threshold`` go through NMS, at most
  ``max_size_per_class`` per class; the image's survivors sorted by score, at most
  ``max_total_size``, give ``nmsed_boxes (B, T, 4)``, ``nmsed_scores (B, T)``,
  ``nmsed_classes (B, T)`` (zero padded) and ``nmsed_num (B,)`` int32. ``transpose_box=True``
  takes boxes as ``(B, q, 4, N)``. ``change_coordinate_frame`` normalises the boxes to a clip
  window, which this operator has none of: it is validated and has no effect.

Results are data dependent but their shapes are not (padded as on Ascend), so fake kernels
are exact. No backward (Ascend defines none).
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_nms_v4", "npu_nms_with_mask", "npu_batch_nms"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

BOX_DTYPES = (torch.float16, torch.float32)


def _pairwise_iou(boxes: torch.Tensor) -> torch.Tensor:
    b = boxes.float()
    lo = torch.minimum(b[:, :2], b[:, 2:])
    hi = torch.maximum(b[:, :2], b[:, 2:])
    area = (hi - lo).prod(1)
    inter = (torch.minimum(hi[:, None], hi[None]) - torch.maximum(lo[:, None], lo[None])).clamp_min(0).prod(2)
    union = area[:, None] + area[None] - inter
    return inter / union.clamp_min(1e-9)


def greedy_keep(boxes: torch.Tensor, order: list[int], iou_threshold: float, limit: int | None = None) -> list[int]:
    """Indices of ``boxes`` kept by greedy NMS visiting ``order``, at most ``limit``."""
    if not order:
        return []
    overlaps = (_pairwise_iou(boxes) > iou_threshold).cpu().tolist()
    kept: list[int] = []
    suppressed = [False] * boxes.shape[0]
    for i in order:
        if suppressed[i]:
            continue
        kept.append(i)
        if limit is not None and len(kept) == limit:
            break
        row = overlaps[i]
        for j, hit in enumerate(row):
            if hit:
                suppressed[j] = True
    return kept


def _descending(scores: torch.Tensor, selected: torch.Tensor) -> list[int]:
    order = torch.sort(scores.float(), descending=True, stable=True).indices
    return [i for i in order.cpu().tolist() if selected[i]]


# --- npu_nms_v4 ------------------------------------------------------------------------------

def _check_nms_v4_args(boxes, scores, max_output_size, iou_threshold, scores_threshold) -> int:
    op = "npu_nms_v4"
    check.tensor(op, "self", boxes)
    check.tensor(op, "scores", scores)
    check.dtype(op, "self", boxes, BOX_DTYPES)
    if boxes.dim() != 2 or boxes.shape[1] != 4:
        raise ValueError(f"{op}: self (the boxes) must have shape (num_boxes, 4), got {tuple(boxes.shape)}")
    if tuple(scores.shape) != (boxes.shape[0],):
        raise ValueError(f"{op}: scores must have shape ({boxes.shape[0]},), one per box, got {tuple(scores.shape)}")
    for name, value in (("iou_threshold", iou_threshold), ("scores_threshold", scores_threshold)):
        check.tensor(op, name, value)
        if value.dim() != 0:
            raise ValueError(f"{op}: {name} must be a 0-dimensional tensor, got shape {tuple(value.shape)}")
    size = int(max_output_size)
    if size < 0:
        raise ValueError(f"{op}: max_output_size={size} must be non-negative")
    return size


def _nms_v4(self, scores, max_output_size, iou_threshold, scores_threshold, pad_to_max_output_size=False):
    size = _check_nms_v4_args(self, scores, max_output_size, iou_threshold, scores_threshold)
    order = _descending(scores, (scores.float() > scores_threshold.float()).cpu().tolist())
    kept = greedy_keep(self, order, float(iou_threshold), size)
    selected = torch.zeros(size, dtype=torch.int32, device=self.device)
    if kept:
        selected[: len(kept)] = torch.tensor(kept, dtype=torch.int32, device=self.device)
    return selected, torch.tensor(len(kept), dtype=torch.int32, device=self.device)


def _nms_v4_fake(self, scores, max_output_size, iou_threshold, scores_threshold, pad_to_max_output_size=False):
    size = _check_nms_v4_args(self, scores, max_output_size, iou_threshold, scores_threshold)
    return self.new_empty((size,), dtype=torch.int32), self.new_empty((), dtype=torch.int32)


_family.define(
    "npu_nms_v4(Tensor self, Tensor scores, Scalar max_output_size, Tensor iou_threshold, "
    "Tensor scores_threshold, bool pad_to_max_output_size=False) -> (Tensor, Tensor)",
    kernel=_nms_v4,
    fake=_nms_v4_fake,
)


# --- npu_nms_with_mask -----------------------------------------------------------------------

def _check_nms_with_mask_args(inputs) -> None:
    op = "npu_nms_with_mask"
    check.tensor(op, "inputs", inputs)
    check.dtype(op, "inputs", inputs, BOX_DTYPES)
    if inputs.dim() != 2 or inputs.shape[1] not in (5, 8):
        raise ValueError(
            f"{op}: inputs must have shape (N, 8) (or (N, 5)): rows [x1, y1, x2, y2, score, ...], "
            f"got {tuple(inputs.shape)}"
        )


def _nms_with_mask(inputs, iou_threshold):
    _check_nms_with_mask_args(inputs)
    n = inputs.shape[0]
    kept = greedy_keep(inputs[:, :4], list(range(n)), float(iou_threshold))
    mask = torch.zeros(n, dtype=torch.uint8, device=inputs.device)
    if kept:
        mask[torch.tensor(kept, device=inputs.device)] = 1
    idx = torch.arange(n, dtype=torch.int32, device=inputs.device)
    return inputs[:, :5].clone(memory_format=torch.contiguous_format), idx, mask


def _nms_with_mask_fake(inputs, iou_threshold):
    _check_nms_with_mask_args(inputs)
    n = inputs.shape[0]
    return (
        inputs.new_empty((n, 5)),
        inputs.new_empty((n,), dtype=torch.int32),
        inputs.new_empty((n,), dtype=torch.uint8),
    )


_family.define(
    "npu_nms_with_mask(Tensor inputs, Scalar iou_threshold) -> (Tensor, Tensor, Tensor)",
    kernel=_nms_with_mask,
    fake=_nms_with_mask_fake,
)


# --- npu_batch_nms ---------------------------------------------------------------------------

def _check_batch_nms_args(boxes, scores, max_size_per_class, max_total_size, transpose_box):
    op = "npu_batch_nms"
    check.tensor(op, "self", boxes)
    check.tensor(op, "scores", scores)
    check.dtype(op, "self", boxes, BOX_DTYPES)
    check.same_dtype(op, "scores", scores, "self", boxes)
    if transpose_box:
        if boxes.dim() != 4 or boxes.shape[2] != 4:
            raise ValueError(f"{op}: with transpose_box=True self must have shape (batch, q, 4, num_anchors), got {tuple(boxes.shape)}")
        boxes = boxes.permute(0, 3, 1, 2)
    if boxes.dim() != 4 or boxes.shape[3] != 4:
        raise ValueError(f"{op}: self must have shape (batch, num_anchors, q, 4), got {tuple(boxes.shape)}")
    if scores.dim() != 3 or tuple(scores.shape[:2]) != tuple(boxes.shape[:2]):
        raise ValueError(
            f"{op}: scores must have shape (batch, num_anchors, num_classes) = ({boxes.shape[0]}, "
            f"{boxes.shape[1]}, num_classes), got {tuple(scores.shape)}"
        )
    if boxes.shape[2] not in (1, scores.shape[2]):
        raise ValueError(f"{op}: self's q dimension ({boxes.shape[2]}) must be 1 or num_classes ({scores.shape[2]})")
    for name, value in (("max_size_per_class", max_size_per_class), ("max_total_size", max_total_size)):
        if value <= 0:
            raise ValueError(f"{op}: {name}={value} must be positive")
    return boxes


def _batch_nms(self, scores, score_threshold, iou_threshold, max_size_per_class, max_total_size,
               change_coordinate_frame=False, transpose_box=False):
    boxes = _check_batch_nms_args(self, scores, max_size_per_class, max_total_size, transpose_box)
    batch, _anchors, q, _ = boxes.shape
    classes = scores.shape[2]
    out_boxes = boxes.new_zeros((batch, max_total_size, 4))
    out_scores = scores.new_zeros((batch, max_total_size))
    out_classes = scores.new_zeros((batch, max_total_size))
    out_num = torch.zeros(batch, dtype=torch.int32, device=self.device)
    for b in range(batch):
        found = []  # (score, class, anchor)
        for c in range(classes):
            class_boxes = boxes[b, :, 0 if q == 1 else c]
            class_scores = scores[b, :, c]
            order = _descending(class_scores, (class_scores.float() > score_threshold).cpu().tolist())
            class_score_values = class_scores.float().cpu().tolist()
            for anchor in greedy_keep(class_boxes, order, iou_threshold, max_size_per_class):
                found.append((class_score_values[anchor], c, anchor))
        # by descending score; ties keep class, then anchor order (a stable sort)
        found.sort(key=lambda item: -item[0])
        found = found[:max_total_size]
        for slot, (_score, c, anchor) in enumerate(found):
            out_boxes[b, slot] = boxes[b, anchor, 0 if q == 1 else c]
            out_scores[b, slot] = scores[b, anchor, c]
            out_classes[b, slot] = c
        out_num[b] = len(found)
    return out_boxes, out_scores, out_classes, out_num


def _batch_nms_fake(self, scores, score_threshold, iou_threshold, max_size_per_class, max_total_size,
                    change_coordinate_frame=False, transpose_box=False):
    boxes = _check_batch_nms_args(self, scores, max_size_per_class, max_total_size, transpose_box)
    batch = boxes.shape[0]
    return (
        boxes.new_empty((batch, max_total_size, 4)),
        scores.new_empty((batch, max_total_size)),
        scores.new_empty((batch, max_total_size)),
        scores.new_empty((batch,), dtype=torch.int32),
    )


_family.define(
    "npu_batch_nms(Tensor self, Tensor scores, float score_threshold, float iou_threshold, "
    "int max_size_per_class, int max_total_size, bool change_coordinate_frame=False, "
    "bool transpose_box=False) -> (Tensor, Tensor, Tensor, Tensor)",
    kernel=_batch_nms,
    fake=_batch_nms_fake,
)

npu_nms_v4 = torch.ops.npu.npu_nms_v4
npu_nms_with_mask = torch.ops.npu.npu_nms_with_mask
npu_batch_nms = torch.ops.npu.npu_batch_nms
