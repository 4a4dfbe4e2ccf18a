"""Box overlap measures as Ascend detection code calls them: ``npu_iou`` and the regression
losses' ``npu_giou``, ``npu_diou``, ``npu_ciou`` (with their backwards).

Formulas (Ascend documentation; boxes are ``[x1, y1, x2, y2]``, or ``[cx, cy, w, h]`` with
``trans=True``):

* ``npu_iou(bboxes, gtboxes, mode)``: ``bboxes`` is ``(N, 4)``, ``gtboxes`` ``(M, 4)``; the
  result is ``(M, N)``, ``overlap[m, n] = inter / union`` (``mode=0``, IoU) or
  ``inter / area(gtboxes[m])`` (``mode=1``, IoF, the intersection over the foreground).
* ``npu_giou``/``npu_diou``/``npu_ciou(self, gtboxes, trans, is_cross, mode)``: the boxes are
  the columns of ``(4, N)`` and ``(4, M)`` tensors. ``is_cross=True`` compares every pair,
  giving ``(M, N)``; otherwise box ``n`` is paired with box ``n`` (``N == M``), giving ``(1, N)``.
  ``GIoU = IoU - (C - U) / C`` (``C`` the smallest enclosing box's area, ``U`` the union);
  ``DIoU = IoU - rho^2 / c^2`` (``rho`` the distance of the centres, ``c`` the enclosing
  box's diagonal); ``CIoU = DIoU - alpha * v`` with
  ``v = 4 / pi^2 * (atan(w_gt / h_gt) - atan(w / h))^2`` and ``alpha = v / (1 - IoU + v)``,
  ``alpha`` taken as a constant in the backward (as the CIoU paper prescribes).

Arithmetic is float32, rounded once to the input dtype; denominators are kept off zero
(``EPS``) so that empty boxes give finite values. Each backward is the exact gradient of the
forward formula (``_formula_backward``).
"""
from __future__ import annotations

import math

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._formula_backward import vjp
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_iou", "npu_giou", "npu_diou", "npu_ciou"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

BOX_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MODES = (0, 1)  # 0: IoU, 1: IoF
EPS = 1e-9


def _xyxy(boxes: torch.Tensor, trans: bool):
    """The four coordinate rows of column boxes ``(4, K)`` as x1, y1, x2, y2."""
    a, b, c, d = boxes.unbind(0)
    if trans:
        return a - c / 2, b - d / 2, a + c / 2, b + d / 2
    return a, b, c, d


def _pairwise_terms(boxes, gtboxes, trans: bool, is_cross: bool, mode: int) -> dict:
    """Intersection, union-or-foreground, and enclosing-box terms of every compared pair."""
    x1, y1, x2, y2 = _xyxy(boxes, trans)
    gx1, gy1, gx2, gy2 = _xyxy(gtboxes, trans)
    if is_cross:  # rows: gt boxes, columns: boxes
        x1, y1, x2, y2 = (t.unsqueeze(0) for t in (x1, y1, x2, y2))
        gx1, gy1, gx2, gy2 = (t.unsqueeze(1) for t in (gx1, gy1, gx2, gy2))
    w, h = x2 - x1, y2 - y1
    gw, gh = gx2 - gx1, gy2 - gy1
    inter = (torch.minimum(x2, gx2) - torch.maximum(x1, gx1)).clamp_min(0) * (
        torch.minimum(y2, gy2) - torch.maximum(y1, gy1)
    ).clamp_min(0)
    union = w * h + gw * gh - inter
    denominator = union if mode == 0 else gw * gh
    enclosing_w = torch.maximum(x2, gx2) - torch.minimum(x1, gx1)
    enclosing_h = torch.maximum(y2, gy2) - torch.minimum(y1, gy1)
    return {
        "iou": inter / denominator.clamp_min(EPS),
        "union": union,
        "enclosing_w": enclosing_w,
        "enclosing_h": enclosing_h,
        "centre_dx": (x1 + x2 - gx1 - gx2) / 2,
        "centre_dy": (y1 + y2 - gy1 - gy2) / 2,
        "w": w, "h": h, "gw": gw, "gh": gh,
    }


def _giou_formula(boxes, gtboxes, trans, is_cross, mode):
    t = _pairwise_terms(boxes, gtboxes, trans, is_cross, mode)
    enclosing = (t["enclosing_w"] * t["enclosing_h"]).clamp_min(EPS)
    return t["iou"] - (enclosing - t["union"]) / enclosing


def _diou_terms(t):
    diagonal = (t["enclosing_w"] ** 2 + t["enclosing_h"] ** 2).clamp_min(EPS)
    return t["iou"] - (t["centre_dx"] ** 2 + t["centre_dy"] ** 2) / diagonal


def _diou_formula(boxes, gtboxes, trans, is_cross, mode):
    return _diou_terms(_pairwise_terms(boxes, gtboxes, trans, is_cross, mode))


def _ciou_formula(boxes, gtboxes, trans, is_cross, mode):
    t = _pairwise_terms(boxes, gtboxes, trans, is_cross, mode)
    atan_sub = torch.atan(t["gw"] / t["gh"].clamp_min(EPS)) - torch.atan(t["w"] / t["h"].clamp_min(EPS))
    v = (4 / math.pi**2) * atan_sub**2
    alpha = (v / (1 - t["iou"] + v).clamp_min(EPS)).detach()
    return _diou_terms(t) - alpha * v


FORMULAS = {"npu_giou": _giou_formula, "npu_diou": _diou_formula, "npu_ciou": _ciou_formula}


def _check_loss_args(op: str, boxes, gtboxes, is_cross: bool, mode: int) -> list:
    """Validates column boxes; returns the result's shape."""
    check.tensor(op, "self", boxes)
    check.tensor(op, "gtboxes", gtboxes)
    check.dtype(op, "self", boxes, BOX_DTYPES)
    check.same_dtype(op, "gtboxes", gtboxes, "self", boxes)
    check.choice(op, "mode", mode, MODES)
    for name, value in (("self", boxes), ("gtboxes", gtboxes)):
        if value.dim() != 2 or value.shape[0] != 4:
            raise ValueError(
                f"{op}: {name} must have shape (4, n) (one box per column), got {tuple(value.shape)}"
            )
    if is_cross:
        return [gtboxes.shape[1], boxes.shape[1]]
    check.condition(
        boxes.shape[1] == gtboxes.shape[1],
        f"{op}: with is_cross=False self and gtboxes must hold as many boxes (got "
        f"{boxes.shape[1]} and {gtboxes.shape[1]}); pass is_cross=True to compare every pair",
    )
    return [1, boxes.shape[1]]


def _define_loss(op: str) -> None:
    """Defines ``op`` and ``op_backward``; ``npu_ciou`` differs in its ``is_cross`` default,
    its ``atan_sub_flag`` option and its backward's ``atan_sub`` input (Ascend's schemas)."""
    formula = FORMULAS[op]
    backward_op = f"{op}_backward"
    is_ciou = op == "npu_ciou"

    def forward(self, gtboxes, trans, is_cross, mode):
        shape = _check_loss_args(op, self, gtboxes, is_cross, mode)
        return formula(self.float(), gtboxes.float(), trans, is_cross, mode).reshape(shape).to(self.dtype)

    def forward_fake(self, gtboxes, trans, is_cross, mode):
        return self.new_empty(_check_loss_args(op, self, gtboxes, is_cross, mode))

    def backward(grad, bboxes, gtboxes, trans, is_cross, mode):
        shape = _check_loss_args(backward_op, bboxes, gtboxes, is_cross, mode)
        return vjp(lambda b, g: formula(b, g, trans, is_cross, mode).reshape(shape), (bboxes, gtboxes), grad)

    def backward_fake(grad, bboxes, gtboxes, trans, is_cross, mode):
        _check_loss_args(backward_op, bboxes, gtboxes, is_cross, mode)
        return bboxes.new_empty(bboxes.shape), gtboxes.new_empty(gtboxes.shape)

    def setup_context(ctx, inputs, output) -> None:
        self, gtboxes, trans, is_cross, mode = inputs[:5]
        ctx.options = (trans, is_cross, mode)
        ctx.save_for_backward(self, gtboxes)

    if is_ciou:
        schema = ("npu_ciou(Tensor self, Tensor gtboxes, bool trans=False, bool is_cross=True, int mode=0, "
                  "bool atan_sub_flag=False) -> Tensor")
        backward_schema = ("npu_ciou_backward(Tensor grad, Tensor bboxes, Tensor gtboxes, Tensor? atan_sub, "
                           "bool trans=False, bool is_cross=True, int mode=0) -> (Tensor, Tensor)")

        def kernel(self, gtboxes, trans=False, is_cross=True, mode=0, atan_sub_flag=False):
            return forward(self, gtboxes, trans, is_cross, mode)

        def fake(self, gtboxes, trans=False, is_cross=True, mode=0, atan_sub_flag=False):
            return forward_fake(self, gtboxes, trans, is_cross, mode)

        # atan_sub (the forward's saved arctan difference on Ascend) is recomputed here.
        def backward_kernel(grad, bboxes, gtboxes, atan_sub=None, trans=False, is_cross=True, mode=0):
            return backward(grad, bboxes, gtboxes, trans, is_cross, mode)

        def backward_fake_kernel(grad, bboxes, gtboxes, atan_sub=None, trans=False, is_cross=True, mode=0):
            return backward_fake(grad, bboxes, gtboxes, trans, is_cross, mode)

        def autograd(ctx, grad):
            self, gtboxes = ctx.saved_tensors
            grads = torch.ops.npu.npu_ciou_backward(grad, self, gtboxes, None, *ctx.options)
            return (*grads, None, None, None, None)
    else:
        schema = (f"{op}(Tensor self, Tensor gtboxes, bool trans=False, bool is_cross=False, int mode=0) "
                  "-> Tensor")
        backward_schema = (f"{backward_op}(Tensor grad, Tensor bboxes, Tensor gtboxes, bool trans=False, "
                           "bool is_cross=False, int mode=0) -> (Tensor, Tensor)")

        def kernel(self, gtboxes, trans=False, is_cross=False, mode=0):
            return forward(self, gtboxes, trans, is_cross, mode)

        def fake(self, gtboxes, trans=False, is_cross=False, mode=0):
            return forward_fake(self, gtboxes, trans, is_cross, mode)

        def backward_kernel(grad, bboxes, gtboxes, trans=False, is_cross=False, mode=0):
            return backward(grad, bboxes, gtboxes, trans, is_cross, mode)

        def backward_fake_kernel(grad, bboxes, gtboxes, trans=False, is_cross=False, mode=0):
            return backward_fake(grad, bboxes, gtboxes, trans, is_cross, mode)

        def autograd(ctx, grad):
            self, gtboxes = ctx.saved_tensors
            grads = getattr(torch.ops.npu, backward_op)(grad, self, gtboxes, *ctx.options)
            return (*grads, None, None, None)

    _family.define(schema, kernel=kernel, fake=fake, backward=autograd, setup_context=setup_context)
    _family.define(backward_schema, kernel=backward_kernel, fake=backward_fake_kernel)


for _op in FORMULAS:
    _define_loss(_op)


# --- npu_iou -------------------------------------------------------------------------------

def _check_iou_args(bboxes, gtboxes, mode: int) -> None:
    op = "npu_iou"
    check.tensor(op, "bboxes", bboxes)
    check.tensor(op, "gtboxes", gtboxes)
    check.dtype(op, "bboxes", bboxes, BOX_DTYPES)
    check.dtype(op, "gtboxes", gtboxes, BOX_DTYPES)
    check.choice(op, "mode", mode, MODES)
    for name, value in (("bboxes", bboxes), ("gtboxes", gtboxes)):
        if value.dim() != 2 or value.shape[1] != 4:
            raise ValueError(f"{op}: {name} must have shape (n, 4) ([x1, y1, x2, y2] rows), got {tuple(value.shape)}")


def _iou(bboxes, gtboxes, mode: int = 0):
    _check_iou_args(bboxes, gtboxes, mode)
    terms = _pairwise_terms(bboxes.float().t(), gtboxes.float().t(), False, True, mode)
    return terms["iou"].to(bboxes.dtype)


def _iou_fake(bboxes, gtboxes, mode: int = 0):
    _check_iou_args(bboxes, gtboxes, mode)
    return bboxes.new_empty((gtboxes.shape[0], bboxes.shape[0]))


_family.define(
    "npu_iou(Tensor bboxes, Tensor gtboxes, int mode=0) -> Tensor",
    kernel=_iou,
    fake=_iou_fake,
)

npu_iou = torch.ops.npu.npu_iou
npu_giou = torch.ops.npu.npu_giou
npu_diou = torch.ops.npu.npu_diou
npu_ciou = torch.ops.npu.npu_ciou
