"""Overlaps of rotated boxes as Ascend's rotated-detection code calls them:
``npu_rotated_overlaps`` (intersection areas) and ``npu_rotated_iou``.

Semantics (Ascend documentation): ``self (B, 5, N)`` and ``query_boxes (B, 5, K)`` hold one
box per column, ``[x_centre, y_centre, width, height, angle]`` (``trans=False``, "xywht") or
``[x1, y1, x2, y2, angle]`` (``trans=True``, "xyxyt": the unrotated corners), the angle in
degrees, counter-clockwise. ``npu_rotated_overlaps`` gives the intersection areas
``(B, N, K)``; ``npu_rotated_iou`` divides by the union (``mode=0``) or by the query box's
area (``mode=1``, IoF), for every pair (``is_cross=True``, ``(B, N, K)``) or box ``n`` with
query box ``n`` (``is_cross=False``, ``N == K``, ``(B, N)``). ``v_threshold`` and
``e_threshold`` are Ascend's tolerances for its vertex and edge tests; the intersection here
is computed exactly (float64), so they are validated and need no effect.

The intersection of two rectangles is a convex polygon whose vertices are the corners of
each inside the other and the crossings of their edges; its area is the fan of triangles
around their centroid, taken in angular order. All pairs are computed at once (24 candidate
points each). No backward (Ascend defines none).
"""
from __future__ import annotations

import math

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_rotated_overlaps", "npu_rotated_iou"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

INSIDE_TOLERANCE = 1e-9


def _corners(boxes: torch.Tensor, trans: bool) -> torch.Tensor:
    """Column boxes ``(B, 5, N)`` -> corners ``(B, N, 4, 2)`` in counter-clockwise order."""
    b = boxes.double()
    if trans:
        x1, y1, x2, y2, angle = b.unbind(1)
        cx, cy, w, h = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1).abs(), (y2 - y1).abs()
    else:
        cx, cy, w, h, angle = b.unbind(1)
    theta = angle * (math.pi / 180)
    cos, sin = torch.cos(theta), torch.sin(theta)
    local = torch.tensor([[-0.5, -0.5], [0.5, -0.5], [0.5, 0.5], [-0.5, 0.5]], dtype=torch.float64, device=b.device)
    dx = local[:, 0] * w.unsqueeze(-1)
    dy = local[:, 1] * h.unsqueeze(-1)
    x = cx.unsqueeze(-1) + dx * cos.unsqueeze(-1) - dy * sin.unsqueeze(-1)
    y = cy.unsqueeze(-1) + dx * sin.unsqueeze(-1) + dy * cos.unsqueeze(-1)
    return torch.stack([x, y], dim=-1)


def _inside(points: torch.Tensor, corners: torch.Tensor) -> torch.Tensor:
    """Whether ``points (..., P, 2)`` lie in the convex quads ``corners (..., 4, 2)``."""
    edges = corners.roll(-1, dims=-2) - corners  # (..., 4, 2)
    rel = points.unsqueeze(-2) - corners.unsqueeze(-3)  # (..., P, 4, 2)
    cross = edges[..., 0].unsqueeze(-2) * rel[..., 1] - edges[..., 1].unsqueeze(-2) * rel[..., 0]
    scale = edges.norm(dim=-1).unsqueeze(-2) * rel.norm(dim=-1) + 1.0
    return (cross >= -INSIDE_TOLERANCE * scale).all(dim=-1)


def _edge_crossings(a: torch.Tensor, b: torch.Tensor):
    """Crossing points of every edge of quad ``a`` with every edge of ``b``: (..., 16, 2), valid."""
    p, r = a.unsqueeze(-2), (a.roll(-1, dims=-2) - a).unsqueeze(-2)  # (..., 4, 1, 2)
    q, s = b.unsqueeze(-3), (b.roll(-1, dims=-2) - b).unsqueeze(-3)  # (..., 1, 4, 2)
    denom = r[..., 0] * s[..., 1] - r[..., 1] * s[..., 0]
    qp = q - p
    safe = torch.where(denom.abs() < 1e-18, torch.ones_like(denom), denom)
    t = (qp[..., 0] * s[..., 1] - qp[..., 1] * s[..., 0]) / safe
    u = (qp[..., 0] * r[..., 1] - qp[..., 1] * r[..., 0]) / safe
    valid = (denom.abs() >= 1e-18) & (t >= 0) & (t <= 1) & (u >= 0) & (u <= 1)
    points = p + t.unsqueeze(-1) * r
    shape = points.shape[:-3]
    return points.reshape(*shape, 16, 2), valid.reshape(*shape, 16)


def intersection_areas(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Areas of the intersections of quads ``a`` and ``b`` (broadcast ``(..., 4, 2)``), float64."""
    a, b = torch.broadcast_tensors(a, b)
    crossings, crossing_valid = _edge_crossings(a, b)
    points = torch.cat([a, b, crossings], dim=-2)  # (..., 24, 2)
    valid = torch.cat([_inside(a, b), _inside(b, a), crossing_valid], dim=-1)
    count = valid.sum(-1, keepdim=True)
    weights = valid.double()
    centre = (points * weights.unsqueeze(-1)).sum(-2) / count.clamp_min(1)
    rel = points - centre.unsqueeze(-2)
    angle = torch.atan2(rel[..., 1], rel[..., 0])
    angle = torch.where(valid, angle, torch.full_like(angle, 10.0))  # invalid points sort last
    order = angle.argsort(dim=-1)
    rel = rel.gather(-2, order.unsqueeze(-1).expand_as(rel))
    slots = torch.arange(points.shape[-2], device=points.device)
    following = torch.where(slots + 1 < count, slots + 1, torch.zeros_like(slots))
    rel_next = rel.gather(-2, following.unsqueeze(-1).expand_as(rel))
    cross = rel[..., 0] * rel_next[..., 1] - rel[..., 1] * rel_next[..., 0]
    area = 0.5 * torch.where(slots < count, cross, torch.zeros_like(cross)).sum(-1)
    return torch.where(count.squeeze(-1) >= 3, area.clamp_min(0), torch.zeros_like(area))


def _check_rotated_args(op: str, boxes, query_boxes) -> None:
    check.tensor(op, "self", boxes)
    check.tensor(op, "query_boxes", query_boxes)
    check.dtype(op, "self", boxes, check.FLOATING)
    check.same_dtype(op, "query_boxes", query_boxes, "self", boxes)
    for name, value in (("self", boxes), ("query_boxes", query_boxes)):
        if value.dim() != 3 or value.shape[1] != 5:
            raise ValueError(f"{op}: {name} must have shape (B, 5, n): one [x, y, w, h, angle] box per column, got {tuple(value.shape)}")
    if boxes.shape[0] != query_boxes.shape[0]:
        raise ValueError(f"{op}: self and query_boxes must have the same batch size, got {boxes.shape[0]} and {query_boxes.shape[0]}")


def _overlaps(self, query_boxes, trans: bool = False):
    _check_rotated_args("npu_rotated_overlaps", self, query_boxes)
    a, b = _corners(self, trans), _corners(query_boxes, trans)
    return intersection_areas(a.unsqueeze(2), b.unsqueeze(1)).to(self.dtype)


def _overlaps_fake(self, query_boxes, trans: bool = False):
    _check_rotated_args("npu_rotated_overlaps", self, query_boxes)
    return self.new_empty((self.shape[0], self.shape[2], query_boxes.shape[2]))


_family.define("npu_rotated_overlaps(Tensor self, Tensor query_boxes, bool trans=False) -> Tensor",
               kernel=_overlaps, fake=_overlaps_fake)


def _iou_shape(op, self, query_boxes, mode, is_cross) -> tuple:
    _check_rotated_args(op, self, query_boxes)
    check.choice(op, "mode", mode, (0, 1))
    if is_cross:
        return (self.shape[0], self.shape[2], query_boxes.shape[2])
    if self.shape[2] != query_boxes.shape[2]:
        raise ValueError(f"{op}: with is_cross=False self and query_boxes must hold as many boxes, got {self.shape[2]} and {query_boxes.shape[2]}")
    return (self.shape[0], self.shape[2])


def _rotated_iou(self, query_boxes, trans: bool = False, mode: int = 0, is_cross: bool = True,
                 v_threshold: float = 0.0, e_threshold: float = 0.0):
    _iou_shape("npu_rotated_iou", self, query_boxes, mode, is_cross)
    a, b = _corners(self, trans), _corners(query_boxes, trans)
    area_a = _polygon_area(a)
    area_b = _polygon_area(b)
    if is_cross:
        a, b, area_a, area_b = a.unsqueeze(2), b.unsqueeze(1), area_a.unsqueeze(2), area_b.unsqueeze(1)
    inter = intersection_areas(a, b)
    denominator = area_a + area_b - inter if mode == 0 else area_b.expand_as(inter)
    return (inter / denominator.clamp_min(1e-12)).to(self.dtype)


def _polygon_area(corners: torch.Tensor) -> torch.Tensor:
    x, y = corners[..., 0], corners[..., 1]
    return 0.5 * (x * y.roll(-1, dims=-1) - x.roll(-1, dims=-1) * y).sum(-1).abs()


def _rotated_iou_fake(self, query_boxes, trans: bool = False, mode: int = 0, is_cross: bool = True,
                      v_threshold: float = 0.0, e_threshold: float = 0.0):
    return self.new_empty(_iou_shape("npu_rotated_iou", self, query_boxes, mode, is_cross))


_family.define(
    "npu_rotated_iou(Tensor self, Tensor query_boxes, bool trans=False, int mode=0, bool is_cross=True, "
    "float v_threshold=0.0, float e_threshold=0.0) -> Tensor",
    kernel=_rotated_iou, fake=_rotated_iou_fake,
)

npu_rotated_overlaps = torch.ops.npu.npu_rotated_overlaps
npu_rotated_iou = torch.ops.npu.npu_rotated_iou
