"""The detection operators (box overlaps, box coding, non-maximum suppression) against float64
references: torchvision's box measures and plain-PyTorch formulas of Ascend's documentation,
forward and backward, plus argument errors and opcheck."""
from __future__ import annotations

import pytest
import torch
import torchvision_schemas
from npu_ops_compare import assert_close, opcheck

import torch_npu

torchvision_schemas.define()  # torchvision's Python box measures, without its C++ operators
import torchvision.ops as tvo  # noqa: E402

BOX_DTYPES = (torch.float32, torch.float16)


def random_boxes(n, *, generator=None, scale=10.0):
    """(n, 4) valid [x1, y1, x2, y2] boxes."""
    xy = torch.rand(n, 2, generator=generator) * scale
    wh = torch.rand(n, 2, generator=generator) * scale / 2 + 0.5
    return torch.cat([xy, xy + wh], dim=1)


def to_xywh(boxes):
    return torch.cat([(boxes[:, :2] + boxes[:, 2:]) / 2, boxes[:, 2:] - boxes[:, :2]], dim=1)


# --- npu_iou ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", BOX_DTYPES, ids=str)
def test_npu_iou_and_iof_against_float64(dtype):
    b, g = random_boxes(7).to(dtype), random_boxes(5).to(dtype)
    out = torch_npu.npu_iou(b.npu(), g.npu(), 0)
    assert out.shape == (5, 7) and out.dtype == dtype
    assert_close(out, tvo.box_iou(g.double(), b.double()), dtype)
    iof = torch_npu.npu_iou(b.npu(), g.npu(), mode=1)
    bd, gd = b.double(), g.double()
    inter = (torch.minimum(gd[:, None, 2:], bd[None, :, 2:]) - torch.maximum(gd[:, None, :2], bd[None, :, :2])).clamp(min=0).prod(-1)
    gt_area = (gd[:, 2:] - gd[:, :2]).prod(-1)
    assert_close(iof, inter / gt_area[:, None], dtype)


def test_npu_iou_ascend_documented_example():
    bboxes = torch.tensor([[0, 0, 10, 10], [10, 10, 20, 20], [32, 32, 38, 42]], dtype=torch.float16)
    gtboxes = torch.tensor([[0, 0, 10, 20], [0, 10, 10, 10], [10, 10, 20, 20]], dtype=torch.float16)
    out = torch_npu.npu_iou(bboxes.npu(), gtboxes.npu(), 0).cpu()
    assert_close(out, tvo.box_iou(gtboxes.double(), bboxes.double()), torch.float16)
    assert out[0, 0] == 0.5 and out[2, 1] == 1 and out[1].eq(0).all()


# --- npu_giou / npu_diou / npu_ciou -------------------------------------------------------------

CROSS_REFERENCE = {
    "npu_giou": tvo.generalized_box_iou,
    "npu_diou": lambda a, b: tvo.distance_box_iou(a, b, eps=0.0),
    "npu_ciou": lambda a, b: tvo.complete_box_iou(a, b, eps=0.0),
}
PAIRED_LOSS = {
    "npu_giou": tvo.generalized_box_iou_loss,
    "npu_diou": lambda a, b, **kw: tvo.distance_box_iou_loss(a, b, eps=0.0, **kw),
    "npu_ciou": lambda a, b, **kw: tvo.complete_box_iou_loss(a, b, eps=0.0, **kw),
}


@pytest.mark.parametrize("name", sorted(CROSS_REFERENCE))
@pytest.mark.parametrize("trans", [False, True])
def test_box_losses_cross_against_torchvision(name, trans):
    b, g = random_boxes(6), random_boxes(4)
    bi, gi = (to_xywh(b), to_xywh(g)) if trans else (b, g)
    out = getattr(torch_npu, name)(bi.t().contiguous().npu(), gi.t().contiguous().npu(), trans=trans, is_cross=True)
    assert out.shape == (4, 6)
    assert_close(out, CROSS_REFERENCE[name](g.double(), b.double()), torch.float32, scale=5)


@pytest.mark.parametrize("dtype", BOX_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(CROSS_REFERENCE))
def test_box_losses_paired_forward_and_backward(name, dtype):
    # Ascend's training use: xywh column boxes, pairwise, IoU mode; loss = 1 - measure.
    b, g = random_boxes(16), random_boxes(16)
    xb = to_xywh(b).t().contiguous().to(dtype).npu().requires_grad_(True)
    xg = to_xywh(g).t().contiguous().to(dtype).npu().requires_grad_(True)
    out = getattr(torch_npu, name)(xb, xg, trans=True, is_cross=False, mode=0)
    assert out.shape == (1, 16) and out.dtype == dtype
    # reference: the same (rounded) xywh values, in float64, through torchvision's losses
    rb = xb.detach().cpu().double().t().requires_grad_(True)
    rg = xg.detach().cpu().double().t().requires_grad_(True)

    def xyxy(t):
        return torch.cat([t[:, :2] - t[:, 2:] / 2, t[:, :2] + t[:, 2:] / 2], dim=1)

    measure = 1 - PAIRED_LOSS[name](xyxy(rb), xyxy(rg), reduction="none")
    assert_close(out[0], measure, dtype, scale=5)
    seed = torch.randn(16)
    out.backward(seed.to(dtype).npu().unsqueeze(0))
    measure.backward(seed.to(dtype).double())
    assert_close(xb.grad.t(), rb.grad, dtype, scale=20)
    assert_close(xg.grad.t(), rg.grad, dtype, scale=20)


def test_box_loss_argument_errors():
    four = torch.rand(4, 3, device="npu")
    with pytest.raises(ValueError, match=r"self must have shape \(4, n\)"):
        torch_npu.npu_giou(torch.rand(3, 4, device="npu"), four)
    with pytest.raises(ValueError, match="is_cross=False"):
        torch_npu.npu_diou(four, torch.rand(4, 5, device="npu"))
    with pytest.raises(ValueError, match="mode=2"):
        torch_npu.npu_ciou(four, four, mode=2)
    with pytest.raises(ValueError, match=r"gtboxes must have shape \(n, 4\)"):
        torch_npu.npu_iou(torch.rand(3, 4, device="npu"), torch.rand(3, 5, device="npu"))


def test_box_overlap_opcheck():
    b = to_xywh(random_boxes(5)).t().contiguous().npu()
    g = to_xywh(random_boxes(5)).t().contiguous().npu()
    for name in ("npu_giou", "npu_diou"):
        opcheck(getattr(torch.ops.npu, name).default, (b.requires_grad_(True), g, True, False, 0))
        opcheck(getattr(torch.ops.npu, f"{name}_backward").default, (torch.rand(1, 5, device="npu"), b.detach(), g, True, False, 0))
    opcheck(torch.ops.npu.npu_ciou.default, (b, g, True, True, 0, False))
    opcheck(torch.ops.npu.npu_ciou_backward.default, (torch.rand(1, 5, device="npu"), b.detach(), g, None, True, False, 0))
    opcheck(torch.ops.npu.npu_iou.default, (random_boxes(4).npu(), random_boxes(3).npu(), 1))


# --- box coding ------------------------------------------------------------------------------

def legacy_centre_size(b):
    return (b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0] + 1, b[:, 3] - b[:, 1] + 1


def encode_reference(anchors, gts, means, stds):
    px, py, pw, ph = legacy_centre_size(anchors)
    gx, gy, gw, gh = legacy_centre_size(gts)
    d = torch.stack([(gx - px) / pw, (gy - py) / ph, (gw / pw).log(), (gh / ph).log()], 1)
    return (d - torch.tensor(means, dtype=d.dtype)) / torch.tensor(stds, dtype=d.dtype)


def decode_reference(rois, deltas, means, stds, max_shape, clip):
    d = deltas * torch.tensor(stds, dtype=deltas.dtype) + torch.tensor(means, dtype=deltas.dtype)
    ratio = abs(torch.tensor(clip, dtype=torch.float64).log().item())
    px, py, pw, ph = legacy_centre_size(rois)
    gx, gy = px + pw * d[:, 0], py + ph * d[:, 1]
    gw, gh = pw * d[:, 2].clamp(-ratio, ratio).exp(), ph * d[:, 3].clamp(-ratio, ratio).exp()
    h, w = max_shape
    return torch.stack([
        (gx - gw / 2 + 0.5).clamp(0, w - 1), (gy - gh / 2 + 0.5).clamp(0, h - 1),
        (gx + gw / 2 - 0.5).clamp(0, w - 1), (gy + gh / 2 - 0.5).clamp(0, h - 1),
    ], 1)


MEANS, STDS = (0.1, -0.2, 0.05, 0.0), (0.1, 0.1, 0.2, 0.2)


@pytest.mark.parametrize("dtype", BOX_DTYPES, ids=str)
def test_bounding_box_encode_and_decode_against_float64(dtype):
    anchors, gts = random_boxes(12).to(dtype), random_boxes(12).to(dtype)
    enc = torch_npu.npu_bounding_box_encode(anchors.npu(), gts.npu(), *MEANS, *STDS)
    assert enc.dtype == dtype and enc.shape == (12, 4)
    assert_close(enc, encode_reference(anchors.double(), gts.double(), MEANS, STDS), dtype, scale=5)
    deltas = (torch.randn(12, 4) * 2).to(dtype)
    dec = torch_npu.npu_bounding_box_decode(anchors.npu(), deltas.npu(), *MEANS, *STDS, [12, 9], 16 / 1000)
    assert_close(dec, decode_reference(anchors.double(), deltas.double(), MEANS, STDS, (12, 9), 16 / 1000), dtype, scale=5)


def test_decode_inverts_encode():
    anchors, gts = random_boxes(20).double(), random_boxes(20).double()
    enc = torch_npu.npu_bounding_box_encode(anchors.float().npu(), gts.float().npu(), *MEANS, *STDS)
    dec = torch_npu.npu_bounding_box_decode(anchors.float().npu(), enc, *MEANS, *STDS, [1000, 1000], 1e-3)
    assert_close(dec, gts, torch.float32, scale=10)


def test_bounding_box_decode_ascend_documented_example():
    rois = torch.tensor([[1., 2., 3., 4.], [3., 4., 5., 6.]])
    deltas = torch.tensor([[5., 6., 7., 8.], [7., 8., 9., 6.]])
    out = torch_npu.npu_bounding_box_decode(rois.npu(), deltas.npu(), 0, 0, 0, 0, 1, 1, 1, 1, (10, 10), 0.1)
    # Ascend's documented output for this call: [[2.5, 6.5, 9, 9], [9, 9, 9, 9]]
    assert_close(out, decode_reference(rois.double(), deltas.double(), (0,) * 4, (1,) * 4, (10, 10), 0.1), torch.float32)
    assert out.cpu().tolist() == [[2.5, 6.5, 9.0, 9.0], [9.0, 9.0, 9.0, 9.0]]


def test_yolo_boxes_encode_against_float64():
    anchors, gts = random_boxes(9), random_boxes(9)
    stride = torch.randint(8, 33, (9,), dtype=torch.int32)
    out = torch_npu.npu_yolo_boxes_encode(anchors.npu(), gts.npu(), stride.npu())
    a, g, s = anchors.double(), gts.double(), stride.double()
    eps = 1e-6
    ref = torch.stack([
        (((g[:, 0] + g[:, 2]) - (a[:, 0] + a[:, 2])) / 2 / s + 0.5).clamp(eps, 1 - eps),
        (((g[:, 1] + g[:, 3]) - (a[:, 1] + a[:, 3])) / 2 / s + 0.5).clamp(eps, 1 - eps),
        ((g[:, 2] - g[:, 0]) / (a[:, 2] - a[:, 0])).clamp(min=eps).log(),
        ((g[:, 3] - g[:, 1]) / (a[:, 3] - a[:, 1])).clamp(min=eps).log(),
    ], 1)
    assert_close(out, ref, torch.float32)


def test_anchor_response_flags_against_reference():
    gts = torch.tensor([[0., 0., 16., 16.], [40., 8., 60., 30.], [500., 500., 510., 510.]])
    out = torch_npu.npu_anchor_response_flags(gts.npu(), [4, 5], [16, 16], 3)
    assert out.dtype == torch.uint8 and out.shape == (4 * 5 * 3,)
    ref = torch.zeros(4, 5, 3, dtype=torch.uint8)
    for x1, y1, x2, y2 in gts.tolist():
        gx, gy = int((x1 + x2) / 2 // 16), int((y1 + y2) / 2 // 16)
        if 0 <= gx < 5 and 0 <= gy < 4:
            ref[gy, gx] = 1
    assert torch.equal(out.cpu(), ref.reshape(-1))


def test_box_coding_errors_and_opcheck():
    a = random_boxes(4).npu()
    with pytest.raises(ValueError, match="anchor_box has 4 boxes but ground_truth_box has 3"):
        torch_npu.npu_bounding_box_encode(a, a[:3], *MEANS, *STDS)
    with pytest.raises(ValueError, match="max_shape"):
        torch_npu.npu_bounding_box_decode(a, a, *MEANS, *STDS, [10], 0.1)
    with pytest.raises(ValueError, match="stride must have one entry per box"):
        torch_npu.npu_yolo_boxes_encode(a, a, torch.ones(3, dtype=torch.int32, device="npu"))
    opcheck(torch.ops.npu.npu_bounding_box_encode.default, (a, a + 1, *MEANS, *STDS))
    opcheck(torch.ops.npu.npu_bounding_box_decode.default, (a, a / 10, *MEANS, *STDS, [20, 20], 0.016))
    opcheck(torch.ops.npu.npu_yolo_boxes_encode.default, (a, a + 1, torch.full((4,), 8, dtype=torch.int32, device="npu")))
    opcheck(torch.ops.npu.npu_anchor_response_flags.default, (a, [4, 4], [4, 4], 2))


# --- non-maximum suppression -------------------------------------------------------------------

def iou_one(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union


def nms_reference(boxes, scores, iou_threshold, score_threshold=float("-inf"), limit=None):
    boxes, scores = boxes.double().tolist(), scores.double().tolist()
    order = sorted((i for i in range(len(scores)) if scores[i] > score_threshold), key=lambda i: -scores[i])
    kept = []
    for i in order:
        if all(iou_one(boxes[i], boxes[k]) <= iou_threshold for k in kept):
            kept.append(i)
            if limit is not None and len(kept) == limit:
                break
    return kept


def clustered_boxes(n, seed):
    g = torch.Generator().manual_seed(seed)
    return random_boxes(n, generator=g, scale=6.0), torch.rand(n, generator=g)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_npu_nms_v4_against_reference(seed):
    boxes, scores = clustered_boxes(40, seed)
    selected, valid = torch_npu.npu_nms_v4(boxes.npu(), scores.npu(), 12, torch.tensor(0.4).npu(), torch.tensor(0.2).npu())
    ref = nms_reference(boxes, scores, 0.4, 0.2, 12)
    assert selected.dtype == valid.dtype == torch.int32 and selected.shape == (12,) and valid.dim() == 0
    assert int(valid) == len(ref)
    assert selected[: len(ref)].cpu().tolist() == ref
    assert selected[len(ref):].eq(0).all()


def test_npu_nms_with_mask_against_reference():
    boxes, scores = clustered_boxes(30, 5)
    order = torch.sort(scores, descending=True).indices
    rows = torch.cat([boxes[order], scores[order, None], torch.zeros(30, 3)], dim=1)
    out_boxes, idx, mask = torch_npu.npu_nms_with_mask(rows.npu(), 0.5)
    assert out_boxes.shape == (30, 5) and idx.dtype == torch.int32 and mask.dtype == torch.uint8
    assert torch.equal(out_boxes.cpu(), rows[:, :5])
    kept = set(nms_reference(rows[:, :4], rows[:, 4], 0.5))
    assert mask.cpu().tolist() == [1 if i in kept else 0 for i in range(30)]
    # Ascend's documented example: two disjoint boxes are both kept
    example = torch.tensor([[0.0, 1.0, 2.0, 3.0, 0.6, 0.5, 0.4, 0.3], [6.0, 7.0, 8.0, 9.0, 0.4, 0.5, 0.6, 0.7]], dtype=torch.float16)
    b, i, m = torch_npu.npu_nms_with_mask(example.npu(), 0.5)
    assert torch.equal(b.cpu(), example[:, :5]) and i.cpu().tolist() == [0, 1] and m.cpu().tolist() == [1, 1]


@pytest.mark.parametrize("q", [1, 3])
def test_npu_batch_nms_against_reference(q):
    g = torch.Generator().manual_seed(q)
    batch, anchors, classes, per_class, total = 2, 25, 3, 4, 7
    boxes = random_boxes(batch * anchors * q, generator=g, scale=6.0).reshape(batch, anchors, q, 4)
    scores = torch.rand(batch, anchors, classes, generator=g)
    nb, ns, nc, nn = torch_npu.npu_batch_nms(boxes.npu(), scores.npu(), 0.3, 0.5, per_class, total)
    assert nb.shape == (batch, total, 4) and ns.shape == nc.shape == (batch, total) and nn.dtype == torch.int32
    for b in range(batch):
        found = []
        for c in range(classes):
            cb = boxes[b, :, 0 if q == 1 else c]
            for a in nms_reference(cb, scores[b, :, c], 0.5, 0.3, per_class):
                found.append((scores[b, a, c].item(), c, a))
        found.sort(key=lambda t: -t[0])
        found = found[:total]
        assert int(nn[b]) == len(found)
        assert ns[b, : len(found)].cpu().tolist() == [s for s, _, _ in found]
        assert nc[b, : len(found)].cpu().tolist() == [float(c) for _, c, _ in found]
        expected_boxes = torch.stack([boxes[b, a, 0 if q == 1 else c] for _, c, a in found])
        assert torch.equal(nb[b, : len(found)].cpu(), expected_boxes)
        assert nb[b, len(found):].eq(0).all() and ns[b, len(found):].eq(0).all()
    # the (4, N) layout gives the same result
    t = torch_npu.npu_batch_nms(boxes.permute(0, 2, 3, 1).contiguous().npu(), scores.npu(), 0.3, 0.5, per_class, total, transpose_box=True)
    assert all(torch.equal(x.cpu(), y.cpu()) for x, y in zip(t, (nb, ns, nc, nn)))


def test_nms_errors_and_opcheck():
    boxes, scores = clustered_boxes(10, 3)
    boxes, scores = boxes.npu(), scores.npu()
    with pytest.raises(ValueError, match=r"scores must have shape \(10,\)"):
        torch_npu.npu_nms_v4(boxes, scores[:5], 4, torch.tensor(0.5).npu(), torch.tensor(0.0).npu())
    with pytest.raises(ValueError, match="iou_threshold must be a 0-dimensional tensor"):
        torch_npu.npu_nms_v4(boxes, scores, 4, torch.tensor([0.5]).npu(), torch.tensor(0.0).npu())
    with pytest.raises(ValueError, match=r"inputs must have shape \(N, 8\)"):
        torch_npu.npu_nms_with_mask(boxes, 0.5)
    with pytest.raises(ValueError, match="q dimension"):
        torch_npu.npu_batch_nms(boxes.reshape(1, 5, 2, 4), scores.reshape(1, 5, 2)[..., :1].expand(1, 5, 3).contiguous(), 0.1, 0.5, 2, 3)
    opcheck(torch.ops.npu.npu_nms_v4.default, (boxes, scores, 5, torch.tensor(0.5).npu(), torch.tensor(0.1).npu(), False))
    opcheck(torch.ops.npu.npu_nms_with_mask.default, (torch.cat([boxes, scores[:, None]], 1), 0.5))
    opcheck(torch.ops.npu.npu_batch_nms.default, (boxes.reshape(1, 10, 1, 4), torch.rand(1, 10, 2).npu(), 0.1, 0.5, 3, 4))


# --- rotated boxes ---------------------------------------------------------------------------

import math  # noqa: E402


def rect_polygon(cx, cy, w, h, degrees):
    t = math.radians(degrees)
    c, s = math.cos(t), math.sin(t)
    return [(cx + dx * c - dy * s, cy + dx * s + dy * c)
            for dx, dy in ((-w / 2, -h / 2), (w / 2, -h / 2), (w / 2, h / 2), (-w / 2, h / 2))]


def clip(subject, clipper):
    """Sutherland-Hodgman: ``subject`` clipped by the convex counter-clockwise ``clipper``."""
    out = subject
    for i in range(len(clipper)):
        a, b = clipper[i], clipper[(i + 1) % len(clipper)]
        inside = lambda p: (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]) >= 0  # noqa: E731
        points, out = out, []
        for j in range(len(points)):
            p, q = points[j], points[(j + 1) % len(points)]
            if inside(q):
                if not inside(p):
                    out.append(cross_point(p, q, a, b))
                out.append(q)
            elif inside(p):
                out.append(cross_point(p, q, a, b))
        if not out:
            break
    return out


def cross_point(p, q, a, b):
    x1, y1, x2, y2, x3, y3, x4, y4 = *p, *q, *a, *b
    d = (x1 - x2) * (y3 - y4) - (y1 - y2) * (x3 - x4)
    t = ((x1 - x3) * (y3 - y4) - (y1 - y3) * (x3 - x4)) / d
    return (x1 + t * (x2 - x1), y1 + t * (y2 - y1))


def polygon_area(points):
    return abs(sum(points[i][0] * points[(i + 1) % len(points)][1] - points[(i + 1) % len(points)][0] * points[i][1]
                   for i in range(len(points)))) / 2 if len(points) >= 3 else 0.0


def random_rotated(b, n, g):
    xy = torch.rand(b, 2, n, generator=g) * 6
    wh = torch.rand(b, 2, n, generator=g) * 4 + 0.5
    angle = torch.rand(b, 1, n, generator=g) * 180 - 90
    return torch.cat([xy, wh, angle], dim=1)


@pytest.mark.parametrize("trans", [False, True])
def test_rotated_overlaps_and_iou_against_polygon_clipping(trans):
    g = torch.Generator().manual_seed(3)
    boxes, query = random_rotated(2, 5, g), random_rotated(2, 4, g)
    given_boxes, given_query = boxes.clone(), query.clone()
    if trans:  # [x1, y1, x2, y2, angle] of the unrotated box
        for t in (given_boxes, given_query):
            cx, cy, w, h = t[:, 0].clone(), t[:, 1].clone(), t[:, 2].clone(), t[:, 3].clone()
            t[:, 0], t[:, 1], t[:, 2], t[:, 3] = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
    overlaps = torch_npu.npu_rotated_overlaps(given_boxes.npu(), given_query.npu(), trans=trans)
    iou = torch_npu.npu_rotated_iou(given_boxes.npu(), given_query.npu(), trans=trans, mode=0, is_cross=True)
    iof = torch_npu.npu_rotated_iou(given_boxes.npu(), given_query.npu(), trans=trans, mode=1)
    assert overlaps.shape == iou.shape == (2, 5, 4)
    for b in range(2):
        for i in range(5):
            for j in range(4):
                pa = rect_polygon(*boxes[b, :, i].double().tolist())
                pb = rect_polygon(*query[b, :, j].double().tolist())
                inter = polygon_area(clip(pa, pb))
                area_a, area_b = polygon_area(pa), polygon_area(pb)
                assert overlaps[b, i, j].item() == pytest.approx(inter, abs=1e-4)
                assert iou[b, i, j].item() == pytest.approx(inter / (area_a + area_b - inter), abs=1e-5)
                assert iof[b, i, j].item() == pytest.approx(inter / area_b, abs=1e-5)


def test_rotated_iou_one_to_one_and_errors():
    g = torch.Generator().manual_seed(4)
    boxes = random_rotated(1, 6, g)
    same = torch_npu.npu_rotated_iou(boxes.npu(), boxes.npu(), is_cross=False)
    assert same.shape == (1, 6)
    torch.testing.assert_close(same.cpu(), torch.ones(1, 6), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match=r"query_boxes must have shape \(B, 5, n\)"):
        torch_npu.npu_rotated_overlaps(boxes.npu(), torch.rand(1, 4, 3, device="npu"))
    opcheck(torch.ops.npu.npu_rotated_overlaps.default, (boxes.npu(), boxes.npu(), False))
    opcheck(torch.ops.npu.npu_rotated_iou.default, (boxes.npu(), boxes[:, :, :3].contiguous().npu(), False, 1, True, 0.0, 0.0))


# --- grid assign -------------------------------------------------------------------------------

def grid_assign_reference(assigned, overlaps, flags, max_ov, argmax_ov, gt_max, gt_argmax, num_gts, pos_thr, min_pos, assign_all):
    out = assigned.clone()
    flags = flags.bool()
    pos = (max_ov > pos_thr) & flags
    out[pos] = argmax_ov[pos].to(out.dtype) + 1
    for i in range(num_gts):
        if gt_max[i] > min_pos:
            if assign_all:
                out[((overlaps[i] == gt_max[i]) & flags)] = i + 1
            elif flags[gt_argmax[i]]:
                out[gt_argmax[i]] = i + 1
    return out


@pytest.mark.parametrize("assign_all", [True, False])
def test_grid_assign_positive_against_mmdetection_logic(assign_all):
    g = torch.Generator().manual_seed(int(assign_all))
    k, n = 4, 30
    overlaps = torch.rand(k, n, generator=g)
    overlaps[1, 7] = overlaps[1, 9] = 0.99  # tied best boxes for gt 1
    flags = (torch.rand(n, generator=g) > 0.3).to(torch.uint8)
    max_ov, argmax_ov = overlaps.max(0)
    gt_max, gt_argmax = overlaps.max(1)
    assigned = torch.full((n,), -1.0)
    args = (overlaps, flags, max_ov, argmax_ov.int(), gt_max, gt_argmax.int())
    out = torch_npu.npu_grid_assign_positive(assigned.npu(), *(t.npu() for t in args), 3, 0.6, 0.2, assign_all)
    ref = grid_assign_reference(assigned, overlaps, flags, max_ov, argmax_ov, gt_max, gt_argmax, 3, 0.6, 0.2, assign_all)
    assert out.dtype == torch.float32 and torch.equal(out.cpu(), ref)
    opcheck(torch.ops.npu.npu_grid_assign_positive.default, (assigned.npu(), *(t.npu() for t in args), 3, 0.6, 0.2, assign_all))
