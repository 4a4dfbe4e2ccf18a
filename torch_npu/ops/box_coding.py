"""Box coders of the two-stage and YOLO detectors as Ascend code calls them:
``npu_bounding_box_encode``/``npu_bounding_box_decode`` (Faster R-CNN deltas),
``npu_yolo_boxes_encode`` and ``npu_anchor_response_flags`` (YOLOv3 targets).

Formulas (Ascend documentation and its worked examples, which follow mmdetection's legacy
coder: a box ``[x1, y1, x2, y2]`` has width ``x2 - x1 + 1`` and centre ``(x1 + x2) / 2``):

* encode: ``d = ((gx - px) / pw, (gy - py) / ph, log(gw / pw), log(gh / ph))``, then
  ``(d - means) / stds``.
* decode: ``d = deltas * stds + means``; ``dw, dh`` clamped to ``|log(wh_ratio_clip)|``;
  ``gx = px + pw * dx``, ``gw = pw * exp(dw)``; the box is ``gx -+ gw / 2 +- 0.5`` (and the
  same in y), clamped to ``[0, max_shape[1] - 1]`` in x and ``[0, max_shape[0] - 1]`` in y.
* YOLO encode: ``((gx - px) / stride + 0.5, (gy - py) / stride + 0.5)`` clamped to
  ``[eps, 1 - eps]``, and ``log(max(gw / pw, eps))``, ``log(max(gh / ph, eps))`` with plain
  widths ``x2 - x1`` and ``eps = 1e-6``.
* anchor response flags: the feature-map cell holding each gt box's centre
  (``floor(c / stride)``) is flagged for each of its ``num_base_anchors`` anchors (uint8);
  ``stride`` is ``[x, y]``, ``featmap_size`` ``[height, width]``.

Arithmetic is float32, rounded once to the boxes' dtype. No backward (Ascend defines none).
"""
from __future__ import annotations

import math

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = [
    "npu_bounding_box_encode", "npu_bounding_box_decode", "npu_yolo_boxes_encode",
    "npu_anchor_response_flags",
]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

BOX_DTYPES = (torch.float16, torch.float32)
YOLO_EPS = 1e-6


def _check_boxes(op: str, name: str, boxes, dtypes=BOX_DTYPES) -> None:
    check.tensor(op, name, boxes)
    check.dtype(op, name, boxes, dtypes)
    if boxes.dim() != 2 or boxes.shape[1] != 4:
        raise ValueError(f"{op}: {name} must have shape (n, 4), got {tuple(boxes.shape)}")


def _check_pair(op: str, first_name: str, first, second_name: str, second) -> None:
    _check_boxes(op, first_name, first)
    _check_boxes(op, second_name, second)
    check.same_dtype(op, second_name, second, first_name, first)
    check.condition(
        first.shape[0] == second.shape[0],
        f"{op}: {first_name} has {first.shape[0]} boxes but {second_name} has {second.shape[0]}; "
        "they are paired row by row",
    )


def _centre_and_size(boxes: torch.Tensor, extent: float):
    x1, y1, x2, y2 = boxes.unbind(1)
    return (x1 + x2) * 0.5, (y1 + y2) * 0.5, x2 - x1 + extent, y2 - y1 + extent


# --- npu_bounding_box_encode / decode ---------------------------------------------------------

def _encode(anchor_box, ground_truth_box, means0, means1, means2, means3, stds0, stds1, stds2, stds3):
    _check_pair("npu_bounding_box_encode", "anchor_box", anchor_box, "ground_truth_box", ground_truth_box)
    px, py, pw, ph = _centre_and_size(anchor_box.float(), 1.0)
    gx, gy, gw, gh = _centre_and_size(ground_truth_box.float(), 1.0)
    deltas = torch.stack([(gx - px) / pw, (gy - py) / ph, torch.log(gw / pw), torch.log(gh / ph)], dim=1)
    means = deltas.new_tensor([means0, means1, means2, means3])
    stds = deltas.new_tensor([stds0, stds1, stds2, stds3])
    return ((deltas - means) / stds).to(anchor_box.dtype)


def _encode_fake(anchor_box, ground_truth_box, *args):
    _check_pair("npu_bounding_box_encode", "anchor_box", anchor_box, "ground_truth_box", ground_truth_box)
    return anchor_box.new_empty((anchor_box.shape[0], 4))


_family.define(
    "npu_bounding_box_encode(Tensor anchor_box, Tensor ground_truth_box, float means0, float means1, "
    "float means2, float means3, float stds0, float stds1, float stds2, float stds3) -> Tensor",
    kernel=_encode,
    fake=_encode_fake,
)


def _check_decode_args(rois, deltas, max_shape, wh_ratio_clip) -> None:
    op = "npu_bounding_box_decode"
    _check_pair(op, "rois", rois, "deltas", deltas)
    if len(max_shape) != 2 or any(s <= 0 for s in max_shape):
        raise ValueError(f"{op}: max_shape must be [height, width] (two positive ints), got {list(max_shape)}")
    if not wh_ratio_clip > 0:
        raise ValueError(f"{op}: wh_ratio_clip={wh_ratio_clip} must be positive (dw, dh are clamped to |log(wh_ratio_clip)|)")


def _decode(rois, deltas, means0, means1, means2, means3, stds0, stds1, stds2, stds3, max_shape, wh_ratio_clip):
    _check_decode_args(rois, deltas, max_shape, wh_ratio_clip)
    d = deltas.float()
    d = d * d.new_tensor([stds0, stds1, stds2, stds3]) + d.new_tensor([means0, means1, means2, means3])
    dx, dy, dw, dh = d.unbind(1)
    max_ratio = abs(math.log(wh_ratio_clip))
    dw, dh = dw.clamp(-max_ratio, max_ratio), dh.clamp(-max_ratio, max_ratio)
    px, py, pw, ph = _centre_and_size(rois.float(), 1.0)
    gx, gy = px + pw * dx, py + ph * dy
    gw, gh = pw * torch.exp(dw), ph * torch.exp(dh)
    height, width = max_shape
    x1 = (gx - gw * 0.5 + 0.5).clamp(0, width - 1)
    y1 = (gy - gh * 0.5 + 0.5).clamp(0, height - 1)
    x2 = (gx + gw * 0.5 - 0.5).clamp(0, width - 1)
    y2 = (gy + gh * 0.5 - 0.5).clamp(0, height - 1)
    return torch.stack([x1, y1, x2, y2], dim=1).to(rois.dtype)


def _decode_fake(rois, deltas, means0, means1, means2, means3, stds0, stds1, stds2, stds3, max_shape, wh_ratio_clip):
    _check_decode_args(rois, deltas, max_shape, wh_ratio_clip)
    return rois.new_empty((rois.shape[0], 4))


_family.define(
    "npu_bounding_box_decode(Tensor rois, Tensor deltas, float means0, float means1, float means2, "
    "float means3, float stds0, float stds1, float stds2, float stds3, int[1] max_shape, "
    "float wh_ratio_clip) -> Tensor",
    kernel=_decode,
    fake=_decode_fake,
)


# --- npu_yolo_boxes_encode -------------------------------------------------------------------

def _check_yolo_args(anchor_boxes, gt_bboxes, stride) -> None:
    op = "npu_yolo_boxes_encode"
    _check_pair(op, "self", anchor_boxes, "gt_bboxes", gt_bboxes)
    check.tensor(op, "stride", stride)
    check.dtype(op, "stride", stride, (torch.int32, torch.int64))
    if tuple(stride.shape) != (anchor_boxes.shape[0],):
        raise ValueError(
            f"{op}: stride must have one entry per box, shape ({anchor_boxes.shape[0]},), got {tuple(stride.shape)}"
        )


def _yolo_encode(self, gt_bboxes, stride, performance_mode: bool = False):
    _check_yolo_args(self, gt_bboxes, stride)
    px, py, pw, ph = _centre_and_size(self.float(), 0.0)
    gx, gy, gw, gh = _centre_and_size(gt_bboxes.float(), 0.0)
    s = stride.float()
    encoded = torch.stack([
        ((gx - px) / s + 0.5).clamp(YOLO_EPS, 1 - YOLO_EPS),
        ((gy - py) / s + 0.5).clamp(YOLO_EPS, 1 - YOLO_EPS),
        torch.log((gw / pw).clamp_min(YOLO_EPS)),
        torch.log((gh / ph).clamp_min(YOLO_EPS)),
    ], dim=1)
    return encoded.to(self.dtype)


def _yolo_encode_fake(self, gt_bboxes, stride, performance_mode: bool = False):
    _check_yolo_args(self, gt_bboxes, stride)
    return self.new_empty((self.shape[0], 4))


_family.define(
    "npu_yolo_boxes_encode(Tensor self, Tensor gt_bboxes, Tensor stride, bool performance_mode=False) -> Tensor",
    kernel=_yolo_encode,
    fake=_yolo_encode_fake,
)


# --- npu_anchor_response_flags ---------------------------------------------------------------

def _check_flags_args(gt_bboxes, featmap_size, stride, num_base_anchors) -> None:
    op = "npu_anchor_response_flags"
    _check_boxes(op, "self", gt_bboxes)
    for name, value in (("featmap_size", featmap_size), ("stride", stride)):
        if len(value) != 2 or any(v <= 0 for v in value):
            raise ValueError(f"{op}: {name} must be two positive ints, got {list(value)}")
    if num_base_anchors <= 0:
        raise ValueError(f"{op}: num_base_anchors={num_base_anchors} must be positive")


def _anchor_response_flags(self, featmap_size, stride, num_base_anchors: int):
    _check_flags_args(self, featmap_size, stride, num_base_anchors)
    height, width = featmap_size
    cx, cy, _w, _h = _centre_and_size(self.float(), 0.0)
    grid_x = torch.floor(cx / stride[0]).long()
    grid_y = torch.floor(cy / stride[1]).long()
    # A centre outside the feature map flags no cell.
    inside = (grid_x >= 0) & (grid_x < width) & (grid_y >= 0) & (grid_y < height)
    flags = torch.zeros(height * width, dtype=torch.uint8, device=self.device)
    flags[(grid_y * width + grid_x)[inside]] = 1
    return flags.unsqueeze(1).expand(height * width, num_base_anchors).reshape(-1)


def _anchor_response_flags_fake(self, featmap_size, stride, num_base_anchors: int):
    _check_flags_args(self, featmap_size, stride, num_base_anchors)
    return self.new_empty((featmap_size[0] * featmap_size[1] * num_base_anchors,), dtype=torch.uint8)


_family.define(
    "npu_anchor_response_flags(Tensor self, int[2] featmap_size, int[2] stride, int num_base_anchors) -> Tensor",
    kernel=_anchor_response_flags,
    fake=_anchor_response_flags_fake,
)

npu_bounding_box_encode = torch.ops.npu.npu_bounding_box_encode
npu_bounding_box_decode = torch.ops.npu.npu_bounding_box_decode
npu_anchor_response_flags = torch.ops.npu.npu_anchor_response_flags


def npu_yolo_boxes_encode(self, gt_bboxes, weight):
    """``torch.ops.npu.npu_yolo_boxes_encode`` under the Python signature Ascend exports (its
    third argument, the per-box stride, is named ``weight`` there)."""
    return torch.ops.npu.npu_yolo_boxes_encode(self, gt_bboxes, weight)
