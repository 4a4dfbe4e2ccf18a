"""``npu_grid_assign_positive``: the positive-sample step of YOLO's grid assigner (mmdetection's
``GridAssigner``), as Ascend code calls it.

Semantics (Ascend documentation, mmdetection's assigner): starting from the current
assignment ``self`` (one value per box), a box that is responsible
(``box_responsible_flags``) and whose best overlap ``max_overlaps`` exceeds ``pos_iou_thr`` is
assigned ``argmax_overlaps + 1``; then, for each of the first ``num_gts`` gt boxes whose best
overlap ``gt_max_overlaps`` exceeds ``min_pos_iou``, the box(es) holding that overlap are
assigned ``gt + 1``: every responsible box whose overlap with the gt equals it
(``gt_max_assign_all=True``), or the single box ``gt_argmax_overlaps`` if it is responsible.
Later gts win ties, as in the loop they come from. The result has ``self``'s dtype.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_grid_assign_positive"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions


def _check_args(assigned, overlaps, flags, max_overlaps, argmax_overlaps, gt_max_overlaps, gt_argmax_overlaps,
                num_gts) -> None:
    op = "npu_grid_assign_positive"
    for name, value in (("self", assigned), ("overlaps", overlaps), ("box_responsible_flags", flags),
                        ("max_overlaps", max_overlaps), ("argmax_overlaps", argmax_overlaps),
                        ("gt_max_overlaps", gt_max_overlaps), ("gt_argmax_overlaps", gt_argmax_overlaps)):
        check.tensor(op, name, value)
    check.dtype(op, "self", assigned, (torch.float16, torch.float32))
    check.rank(op, "self", assigned, (1,))
    check.rank(op, "overlaps", overlaps, (2,))
    n = assigned.shape[0]
    if overlaps.shape[1] != n:
        raise ValueError(f"{op}: overlaps must have shape (num_gts, {n}), got {tuple(overlaps.shape)}")
    for name, value in (("box_responsible_flags", flags), ("max_overlaps", max_overlaps),
                        ("argmax_overlaps", argmax_overlaps)):
        if tuple(value.shape) != (n,):
            raise ValueError(f"{op}: {name} must have shape ({n},), got {tuple(value.shape)}")
    k = overlaps.shape[0]
    for name, value in (("gt_max_overlaps", gt_max_overlaps), ("gt_argmax_overlaps", gt_argmax_overlaps)):
        if tuple(value.shape) != (k,):
            raise ValueError(f"{op}: {name} must have shape ({k},), got {tuple(value.shape)}")
    if not 0 <= num_gts <= k:
        raise ValueError(f"{op}: num_gts={num_gts} must be in [0, {k}] (the rows of overlaps)")


def _grid_assign_positive(self, overlaps, box_responsible_flags, max_overlaps, argmax_overlaps, gt_max_overlaps,
                          gt_argmax_overlaps, num_gts: int, pos_iou_thr: float, min_pos_iou: float,
                          gt_max_assign_all: bool):
    _check_args(self, overlaps, box_responsible_flags, max_overlaps, argmax_overlaps, gt_max_overlaps,
                gt_argmax_overlaps, num_gts)
    responsible = box_responsible_flags.bool()
    assigned = self.clone()
    positive = (max_overlaps > pos_iou_thr) & responsible
    assigned = torch.where(positive, (argmax_overlaps.long() + 1).to(self.dtype), assigned)
    positions = torch.arange(self.shape[0], device=self.device)
    for gt in range(num_gts):
        if not bool(gt_max_overlaps[gt] > min_pos_iou):
            continue
        if gt_max_assign_all:
            hit = (overlaps[gt] == gt_max_overlaps[gt]) & responsible
        else:
            hit = (positions == gt_argmax_overlaps[gt].long()) & responsible
        assigned = torch.where(hit, torch.full_like(assigned, gt + 1), assigned)
    return assigned


def _grid_assign_positive_fake(self, overlaps, box_responsible_flags, max_overlaps, argmax_overlaps, gt_max_overlaps,
                               gt_argmax_overlaps, num_gts: int, pos_iou_thr: float, min_pos_iou: float,
                               gt_max_assign_all: bool):
    _check_args(self, overlaps, box_responsible_flags, max_overlaps, argmax_overlaps, gt_max_overlaps,
                gt_argmax_overlaps, num_gts)
    return self.new_empty(self.shape)


_family.define(
    "npu_grid_assign_positive(Tensor self, Tensor overlaps, Tensor box_responsible_flags, Tensor max_overlaps, "
    "Tensor argmax_overlaps, Tensor gt_max_overlaps, Tensor gt_argmax_overlaps, int num_gts, float pos_iou_thr, "
    "float min_pos_iou, bool gt_max_assign_all) -> Tensor",
    kernel=_grid_assign_positive, fake=_grid_assign_positive_fake,
)

npu_grid_assign_positive = torch.ops.npu.npu_grid_assign_positive
