"""The IoU family of Ascend's contrib API (deprecated there in favour of the top-level
operators, with a ``FutureWarning``, kept for the code that still imports it):
``npu_iou``/``npu_ptiou``, ``npu_giou``, ``npu_diou``, ``npu_ciou``, each over the top-level
operator Ascend's version calls.

* ``npu_iou(boxes1 (N, 4), boxes2 (M, 4), mode="ptiou", is_normalized=False,
  normalized_scale=100.)``: the ``(N, M)`` IoU of every pair of ``[x1, y1, x2, y2]`` boxes
  (``torch_npu.npu_iou(boxes2, boxes1)``); normalised coordinates are first scaled by
  ``normalized_scale``. ``mode`` is ``"iou"`` or ``"ptiou"``: Ascend's two are the same
  overlap operator here (``npu_ptiou`` is ``npu_iou``), so both give the same values.
* ``npu_giou(boxes1, boxes2, is_permuted=True)``: GIoU of paired ``[x, y, w, h]`` boxes
  ``(n, 4)`` (transposed to ``(4, n)`` first unless ``is_permuted=False``).
* ``npu_diou``/``npu_ciou(boxes1, boxes2, trans=True, is_cross=False, mode=0)``: the
  top-level DIoU/CIoU of ``(4, n)`` boxes (CIoU with ``atan_sub_flag=True``, as Ascend).

Boxes are cast to float32 first (Ascend's dtype rule, ``_box_dtype``).
"""
from __future__ import annotations

import warnings

import torch

import torch_npu
from torch_npu.contrib.function._box_dtype import to_float32_boxes

__all__: list[str] = []  # deprecated names: importable, not exported by ``*`` (as on Ascend)

IOU_MODES = ("iou", "ptiou")


def _deprecated(name: str, replacement: str) -> None:
    warnings.warn(f"torch_npu.contrib.{name} is deprecated. Please use {replacement} as a replacement.",
                  FutureWarning, stacklevel=3)


def npu_iou(boxes1, boxes2, mode="ptiou", is_normalized=False, normalized_scale=100.):
    """The ``(N, M)`` IoU of ``boxes1 (N, 4)`` and ``boxes2 (M, 4)`` (``[x1, y1, x2, y2]``)."""
    _deprecated("npu_iou", "torch_npu.npu_iou or torch_npu.npu_ptiou")
    if mode not in IOU_MODES:
        raise ValueError(f"Expected mode in [iou, ptiou] (npu_iou: got mode={mode!r})")
    boxes1 = to_float32_boxes("npu_iou", "boxes1", boxes1)
    boxes2 = to_float32_boxes("npu_iou", "boxes2", boxes2)
    if is_normalized:
        boxes1 = boxes1 * normalized_scale
        boxes2 = boxes2 * normalized_scale
    return torch_npu.npu_iou(boxes2, boxes1)


npu_ptiou = npu_iou


def npu_giou(boxes1, boxes2, is_permuted=True):
    """GIoU of paired ``[x, y, w, h]`` boxes ``(n, 4)`` (``(4, n)`` with ``is_permuted=False``)."""
    _deprecated("npu_giou", "torch_npu.npu_giou")
    if not isinstance(boxes1, torch.Tensor) or not isinstance(boxes2, torch.Tensor) or boxes1.shape != boxes2.shape:
        got = [tuple(b.shape) if isinstance(b, torch.Tensor) else type(b).__name__ for b in (boxes1, boxes2)]
        raise ValueError(f"Expected boxes1.shape == boxes2.shape (npu_giou pairs box i with box i; got {got})")
    boxes1 = to_float32_boxes("npu_giou", "boxes1", boxes1)
    boxes2 = to_float32_boxes("npu_giou", "boxes2", boxes2)
    if is_permuted:
        boxes1, boxes2 = boxes1.permute(1, 0), boxes2.permute(1, 0)
    return torch_npu.npu_giou(boxes1, boxes2, trans=True, is_cross=False)


def npu_diou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """DIoU of ``(4, n)`` boxes: ``torch_npu.npu_diou``."""
    _deprecated("function.npu_diou", "torch_npu.npu_diou")
    return torch_npu.npu_diou(boxes1, boxes2, trans, is_cross, mode)


def npu_ciou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """CIoU of ``(4, n)`` boxes: ``torch_npu.npu_ciou`` (``atan_sub_flag=True``)."""
    _deprecated("function.npu_ciou", "torch_npu.npu_ciou")
    return torch_npu.npu_ciou(boxes1, boxes2, trans, is_cross, mode, True)
