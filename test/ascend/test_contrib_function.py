"""``torch_npu.contrib.function``: each contrib function on npu against an independent
plain-PyTorch reference computed on cpu (float64 where arithmetic is involved), written the
way Ascend's contrib tests are (``TestCase``, ``create_common_tensor``, ``assertRtolEqual``),
plus the errors Ascend's versions raise on bad input.
"""
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torch_npu
from torch_npu.testing.testcase import TestCase, run_tests
from torch_npu.testing.common_utils import create_common_tensor
from torch_npu.contrib.function import (
    dropout_with_byte_mask, fuse_add_softmax_dropout, matmul_transpose, npu_batched_multiclass_nms,
    npu_bbox_coder_decode_xywh2xyxy, npu_bbox_coder_encode_xyxy2xywh, npu_bbox_coder_encode_yolo,
    npu_fast_condition_index_put, npu_fused_attention, npu_fused_attention_with_layernorm, npu_multiclass_nms,
    npu_single_level_responsible_flags, roll,
)
from torch_npu.contrib.function.anchor_generator import box_dtype_check


def _boxes(n, low=0, high=200, generator=None):
    """``(n, 4)`` boxes ``[x1, y1, x2, y2]`` with x1 < x2, y1 < y2 (integral, exact in half)."""
    corner = torch.randint(low, high, (n, 2), generator=generator)
    size = torch.randint(4, 60, (n, 2), generator=generator)
    return torch.cat([corner, corner + size], 1).float()


# --- NMS ---------------------------------------------------------------------------------------

def _iou64(a, b):
    lo = torch.maximum(a[:2], b[:2])
    hi = torch.minimum(a[2:], b[2:])
    inter = (hi - lo).clamp_min(0).prod()
    union = (a[2:] - a[:2]).prod() + (b[2:] - b[:2]).prod() - inter
    return float(inter / union)


def _multiclass_nms_reference(boxes, scores, score_thr, nms_thr, max_num):
    """Greedy per-class NMS in float64 over boxes (n, C, 4) and class scores (n, C)."""
    found = []
    n, classes = scores.shape
    for c in range(classes):
        order = sorted((i for i in range(n) if scores[i, c] > score_thr), key=lambda i: -float(scores[i, c]))
        kept = []
        for i in order:
            if all(_iou64(boxes[i, c], boxes[j, c]) <= nms_thr for j in kept):
                kept.append(i)
        found += [(float(scores[i, c]), c, i) for i in kept]
    found.sort(key=lambda item: -item[0])
    dets = torch.zeros(max_num, 5, dtype=torch.float64)
    labels = torch.zeros(max_num, dtype=torch.float64)
    for slot, (score, c, i) in enumerate(found[:max_num]):
        dets[slot, :4] = boxes[i, c]
        dets[slot, 4] = score
        labels[slot] = c
    return dets, labels


class TestMulticlassNms(TestCase):
    def _inputs(self, n, classes, per_class_boxes, seed):
        g = torch.Generator().manual_seed(seed)
        # distinct scores, exact in float16 (j / 64), so that the order is unambiguous
        scores = (torch.randperm(n * (classes + 1), generator=g).float() + 1).reshape(n, classes + 1) / 64
        boxes = _boxes(n * classes if per_class_boxes else n, high=40, generator=g)  # dense: boxes overlap
        return (boxes.reshape(n, classes, 4) if per_class_boxes else boxes), scores

    def test_npu_multiclass_nms_shared_boxes(self):
        boxes, scores = self._inputs(40, 3, per_class_boxes=False, seed=1)
        dets, labels = npu_multiclass_nms(boxes.npu(), scores.npu(), score_thr=0.5, nms_thr=0.3, max_num=20)
        ref_boxes = boxes.double()[:, None].expand(40, 3, 4)
        exp_dets, exp_labels = _multiclass_nms_reference(ref_boxes, scores[:, :-1].double(), 0.5, 0.3, 20)
        self.assertEqual(dets.dtype, torch.float16)
        self.assertEqual(tuple(dets.shape), (20, 5))
        self.assertEqual(dets.cpu().double(), exp_dets, prec=0)
        self.assertEqual(labels.cpu().double(), exp_labels, prec=0)
        # zero padding after the survivors
        self.assertTrue(bool((exp_dets[:, 4] > 0).any()))

    def test_npu_multiclass_nms_per_class_boxes_and_score_factors(self):
        boxes, scores = self._inputs(30, 4, per_class_boxes=True, seed=2)
        factors = torch.tensor([0.5, 1.0, 2.0]).repeat(10)
        dets, labels = npu_multiclass_nms(boxes.npu(), scores.npu(), score_thr=1.0, nms_thr=0.2, max_num=8,
                                          score_factors=factors.npu())
        class_scores = scores[:, :-1].double() * factors.double()[:, None]
        exp_dets, exp_labels = _multiclass_nms_reference(boxes.double(), class_scores, 1.0, 0.2, 8)
        self.assertEqual(dets.cpu().double(), exp_dets, prec=0)
        self.assertEqual(labels.cpu().double(), exp_labels, prec=0)

    def test_npu_batched_multiclass_nms(self):
        batch = [self._inputs(25, 3, per_class_boxes=True, seed=s) for s in (3, 4)]
        boxes = torch.stack([b for b, _ in batch])
        scores = torch.stack([s for _, s in batch])
        dets, labels = npu_batched_multiclass_nms(boxes.npu(), scores.npu(), score_thr=0.3, nms_thr=0.4, max_num=6)
        self.assertEqual(tuple(dets.shape), (2, 6, 5))
        self.assertEqual(tuple(labels.shape), (2, 6))
        for b in range(2):
            exp_dets, exp_labels = _multiclass_nms_reference(boxes[b].double(), scores[b, :, :-1].double(), 0.3, 0.4, 6)
            self.assertEqual(dets[b].cpu().double(), exp_dets, prec=0)
            self.assertEqual(labels[b].cpu().double(), exp_labels, prec=0)

    def test_nms_bad_inputs(self):
        boxes, scores = self._inputs(10, 2, per_class_boxes=False, seed=5)
        with self.assertRaisesRegex(ValueError, "max_num"):
            npu_multiclass_nms(boxes.npu(), scores.npu(), max_num=-1)
        with self.assertRaisesRegex(ValueError, "multi_bboxes must have shape"):
            npu_multiclass_nms(boxes[:, :3].npu(), scores.npu())
        with self.assertRaisesRegex(ValueError, "multi_scores must have shape"):
            npu_batched_multiclass_nms(boxes.npu(), scores.npu())
        with self.assertRaisesRegex(ValueError, "score_factors"):
            npu_multiclass_nms(boxes.npu(), scores.npu(), score_factors=torch.ones(3).npu())


# --- box coders and anchor flags -------------------------------------------------------------

def _centre_size64(b, extent):
    b = b.double()
    return (b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0] + extent, b[:, 3] - b[:, 1] + extent


class TestBboxCoder(TestCase):
    def test_encode_xyxy2xywh(self):
        cpu_b, npu_b = create_common_tensor([np.float32, -1, (12, 4)], 0, 256)
        cpu_b[:, 2:] += cpu_b[:, :2] + 2
        cpu_g = cpu_b + torch.randn(12, 4) * 4
        means, stds = [0.1, -0.1, 0.0, 0.2], [0.1, 0.1, 0.2, 0.2]
        out = npu_bbox_coder_encode_xyxy2xywh(cpu_b.npu(), cpu_g.npu(), means, stds)
        px, py, pw, ph = _centre_size64(cpu_b, 1.0)
        gx, gy, gw, gh = _centre_size64(cpu_g, 1.0)
        deltas = torch.stack([(gx - px) / pw, (gy - py) / ph, torch.log(gw / pw), torch.log(gh / ph)], 1)
        expected = (deltas - torch.tensor(means, dtype=torch.float64)) / torch.tensor(stds, dtype=torch.float64)
        self.assertEqual(out.dtype, torch.float32)
        self.assertRtolEqual(expected.float(), out.cpu())
        # normalised coordinates are scaled back first: same deltas
        normalised = npu_bbox_coder_encode_xyxy2xywh((cpu_b / 512).npu(), (cpu_g / 512).npu(), means, stds,
                                                     is_normalized=True, normalized_scale=512.)
        self.assertRtolEqual(expected.float(), normalised.cpu(), prec=1e-3)

    def test_encode_xyxy2xywh_ascend_example(self):
        # the worked example of Ascend's documentation (the last height is negative: log gives nan)
        bboxes = torch.tensor([[1., 2., 3., 4.], [3., 4., 5., 6.]]).npu()
        gt_bboxes = torch.tensor([[5., 6., 7., 8.], [7., 8., 9., 6.]]).npu()
        out = npu_bbox_coder_encode_xyxy2xywh(bboxes, gt_bboxes).cpu()
        self.assertRtolEqual(torch.tensor([[4 / 3, 4 / 3, 0., 0.], [4 / 3, 2 / 3, 0., 0.]])[:, :3], out[:, :3])
        self.assertEqual(float(out[0, 3]), 0.0)
        self.assertTrue(math.isnan(float(out[1, 3])))

    def test_decode_xywh2xyxy(self):
        rois = _boxes(10)
        deltas = torch.randn(10, 4) * 0.5
        deltas[0, 2] = 9.0  # clipped by wh_ratio_clip
        means, stds, max_shape, clip = [0.0, 0.1, 0.0, -0.1], [0.1, 0.1, 0.2, 0.2], (150, 180), 16 / 1000
        out = npu_bbox_coder_decode_xywh2xyxy(rois.int().npu(), deltas.npu(), means, stds, max_shape, clip)
        d = deltas.double() * torch.tensor(stds, dtype=torch.float64) + torch.tensor(means, dtype=torch.float64)
        bound = abs(math.log(clip))
        dw, dh = d[:, 2].clamp(-bound, bound), d[:, 3].clamp(-bound, bound)
        px, py, pw, ph = _centre_size64(rois, 1.0)
        gx, gy, gw, gh = px + pw * d[:, 0], py + ph * d[:, 1], pw * torch.exp(dw), ph * torch.exp(dh)
        expected = torch.stack([
            (gx - gw / 2 + 0.5).clamp(0, max_shape[1] - 1), (gy - gh / 2 + 0.5).clamp(0, max_shape[0] - 1),
            (gx + gw / 2 - 0.5).clamp(0, max_shape[1] - 1), (gy + gh / 2 - 0.5).clamp(0, max_shape[0] - 1),
        ], 1)
        self.assertEqual(out.dtype, torch.float32)  # int boxes are cast to float32, as on Ascend
        self.assertRtolEqual(expected.float(), out.cpu())

    def test_encode_yolo(self):
        bboxes = _boxes(8)
        gt = bboxes + torch.randn(8, 4) * 3
        stride = torch.tensor([8, 16, 32, 8, 16, 32, 8, 16])
        out = npu_bbox_coder_encode_yolo(bboxes.half().npu(), gt.half().npu(), stride.npu())
        px, py, pw, ph = _centre_size64(bboxes.half(), 0.0)
        gx, gy, gw, gh = _centre_size64(gt.half(), 0.0)
        eps, s = 1e-6, stride.double()
        expected = torch.stack([
            ((gx - px) / s + 0.5).clamp(eps, 1 - eps), ((gy - py) / s + 0.5).clamp(eps, 1 - eps),
            torch.log((gw / pw).clamp_min(eps)), torch.log((gh / ph).clamp_min(eps)),
        ], 1)
        self.assertEqual(out.dtype, torch.float32)  # half boxes are cast to float32, as on Ascend
        self.assertRtolEqual(expected.float(), out.cpu())

    def test_coder_bad_inputs(self):
        a, b = _boxes(4).npu(), _boxes(5).npu()
        with self.assertRaisesRegex(ValueError, r"bboxes.size\(0\) == gt_bboxes.size\(0\)"):
            npu_bbox_coder_encode_xyxy2xywh(a, b)
        with self.assertRaisesRegex(ValueError, r"size\(-1\) == 4"):
            npu_bbox_coder_decode_xywh2xyxy(a, a[:, :3])
        with self.assertRaisesRegex(ValueError, r"bboxes.size\(0\) == gt_bboxes.size\(0\)"):
            npu_bbox_coder_encode_yolo(a, b, torch.ones(4, dtype=torch.int32).npu())
        with self.assertRaisesRegex(ValueError, "means must have 4 entries"):
            npu_bbox_coder_encode_xyxy2xywh(a, a, means=[0., 0.])


class TestAnchorGenerator(TestCase):
    def _reference(self, featmap_size, gt_bboxes, stride, num_base_anchors):
        feat_h, feat_w = featmap_size
        cx = (gt_bboxes[:, 0].double() + gt_bboxes[:, 2]) * 0.5
        cy = (gt_bboxes[:, 1].double() + gt_bboxes[:, 3]) * 0.5
        idx = torch.floor(cy / stride[1]).long() * feat_w + torch.floor(cx / stride[0]).long()
        grid = torch.zeros(feat_h * feat_w, dtype=torch.uint8)
        grid[idx] = 1
        return grid[:, None].expand(-1, num_base_anchors).reshape(-1)

    def test_single_level_responsible_flags(self):
        gt_bboxes = torch.randint(0, 150, size=(32, 4))  # centres inside every level below
        for featmap_size, stride in (([10, 10], [16, 16]), ([12, 20], [8, 16]), ([40, 40], [4, 4])):
            out = npu_single_level_responsible_flags(featmap_size, gt_bboxes.npu(), stride, 3)
            self.assertEqual(out.dtype, torch.uint8)
            self.assertEqual(out.cpu(), self._reference(featmap_size, gt_bboxes, stride, 3), prec=0)

    def test_box_dtype_check_casts_to_float32(self):
        for dtype in (torch.int64, torch.float16, torch.float32):
            box = torch.arange(8).reshape(2, 4).to(dtype).npu()
            checked = box_dtype_check(box)
            self.assertEqual(checked.dtype, torch.float32)
            self.assertEqual(checked.cpu(), torch.arange(8.).reshape(2, 4), prec=0)


# --- index_put, roll, matmul_transpose -------------------------------------------------------

class TestIndexOp(TestCase):
    def test_npu_fast_condition_index_put(self):
        for dtype in (np.float16, np.float32):
            for value in (0., 1., 5.5):
                cpu_x, npu_x = create_common_tensor([dtype, -1, (2, 3, 7, 7)], 0, 1)
                expected = cpu_x.clone()
                expected[cpu_x < 0.5] = value
                out = npu_fast_condition_index_put(npu_x, npu_x < 0.5, value)
                self.assertRtolEqual(expected, out.cpu())
                self.assertEqual(npu_x.cpu(), cpu_x, prec=0)  # x itself is left as it was

    def test_integer_input_promotes_for_a_fractional_value(self):
        x = torch.arange(6).reshape(2, 3).npu()
        condition = torch.tensor([[True, False, True], [False, True, False]]).npu()
        self.assertEqual(npu_fast_condition_index_put(x, condition, 1).dtype, torch.int64)
        out = npu_fast_condition_index_put(x, condition, 5.5)
        self.assertEqual(out.cpu(), torch.tensor([[5.5, 1., 5.5], [3., 5.5, 5.]]), prec=0)

    def test_invalid_condition_dtype(self):
        x = torch.randn(2, 3).npu()
        with self.assertRaisesRegex(TypeError, "condition.dtype"):
            npu_fast_condition_index_put(x, torch.randint(0, 2, (2, 3), dtype=torch.int32).npu(), 0.)


class TestRoll(TestCase):
    def test_roll_equals_torch_roll(self):
        for dtype in (np.float16, np.float32, np.uint8, np.int32):
            cpu_x, npu_x = create_common_tensor([dtype, -1, (2, 7, 6, 3)], 0, 10)
            for shifts, dims in (((-3, -3), (1, 2)), ((2, -1), (-3, -2)), ((9, 13), (1, 2))):
                out = roll(npu_x, shifts=shifts, dims=dims)
                self.assertEqual(out.cpu(), torch.roll(cpu_x, shifts, (1, 2)), prec=0)

    def test_roll_backward(self):
        x = torch.randn(2, 5, 4, 3).npu().requires_grad_()
        grad = torch.randn(2, 5, 4, 3)
        roll(x, (1, -2), (1, 2)).backward(grad.npu())
        self.assertEqual(x.grad.cpu(), torch.roll(grad, (-1, 2), (1, 2)), prec=0)

    def test_roll_bad_inputs(self):
        x = torch.randn(2, 5, 4, 3).npu()
        with self.assertRaisesRegex(ValueError, r"x.dim\(\) == 4"):
            roll(x[0], (1, 1), (1, 2))
        with self.assertRaisesRegex(ValueError, r"len\(shifts\) == 2"):
            roll(x, (1, 1, 1), (1, 2))
        with self.assertRaisesRegex(ValueError, "dims=.* is not supported"):
            roll(x, (1, 1), (0, 3))


class TestMatmulTranspose(TestCase):
    def test_matmul_transpose_forward_and_backward(self):
        for dtype, prec in ((np.float32, 1e-4), (np.float16, 1e-3)):
            cpu_a, npu_a = create_common_tensor([dtype, 2, (3, 4, 7, 16)], -1, 1)
            cpu_b, npu_b = create_common_tensor([dtype, 2, (3, 4, 5, 16)], -1, 1)
            npu_a.requires_grad_(True)
            npu_b.requires_grad_(True)
            out = matmul_transpose(npu_a, npu_b)
            grad = torch.randn(3, 4, 7, 5).to(out.dtype)
            out.backward(grad.npu())
            a, b, g = cpu_a.double(), cpu_b.double(), grad.double()
            self.assertRtolEqual((a @ b.transpose(-2, -1)).to(out.dtype), out.detach().cpu(), prec16=prec)
            self.assertRtolEqual((g @ b).to(out.dtype), npu_a.grad.cpu(), prec16=2e-3)
            self.assertRtolEqual((g.transpose(-2, -1) @ a).to(out.dtype), npu_b.grad.cpu(), prec16=2e-3)

    def test_matmul_transpose_does_not_broadcast(self):
        with self.assertRaisesRegex(ValueError, "no broadcasting"):
            matmul_transpose(torch.randn(2, 3, 4).npu(), torch.randn(1, 5, 4).npu())


# --- dropout, add-softmax-dropout ------------------------------------------------------------

class TestDropoutWithByteMask(TestCase):
    def test_keep_fraction_scaling_and_gradient(self):
        x = (torch.rand(100, 100) + 0.5).npu().requires_grad_()
        out = dropout_with_byte_mask(x, p=0.3)
        kept = out.detach().cpu() != 0
        self.assertLess(abs(kept.float().mean().item() - 0.7), 0.03)
        self.assertRtolEqual((x.detach().cpu()[kept].double() / 0.7).float(), out.detach().cpu()[kept])
        out.backward(torch.ones(100, 100).npu())
        self.assertRtolEqual((kept.double() / 0.7).float(), x.grad.cpu())

    def test_seeded_and_trivial_cases(self):
        x = torch.randn(64, 64).npu()
        torch.manual_seed(7)
        first = dropout_with_byte_mask(x, 0.5)
        torch.manual_seed(7)
        self.assertEqual(first.cpu(), dropout_with_byte_mask(x, 0.5).cpu(), prec=0)
        self.assertEqual(dropout_with_byte_mask(x, 0.5, training=False).cpu(), x.cpu(), prec=0)
        self.assertEqual(dropout_with_byte_mask(x, 0.0).cpu(), x.cpu(), prec=0)
        self.assertEqual(dropout_with_byte_mask(x, 1.0).cpu(), torch.zeros(64, 64), prec=0)

    def test_bad_inputs(self):
        x = torch.randn(4).npu()
        with self.assertRaisesRegex(ValueError, "between 0 and 1"):
            dropout_with_byte_mask(x, 1.5)
        with self.assertRaisesRegex(ValueError, "no-inplace"):
            dropout_with_byte_mask(x, 0.5, inplace=True)


class _Doubling(torch.nn.Module):
    def forward(self, x):
        return x * 2


def _add_softmax64(mask, scores, head_size):
    return F.softmax(mask.double() + scores.double() / math.sqrt(head_size), dim=-1)


class TestFuseAddSoftmaxDropout(TestCase):
    def test_formula_path_calls_the_dropout_module(self):
        cpu_mask, npu_mask = create_common_tensor([np.float32, -1, (2, 3, 8, 8)], -1, 1)
        cpu_scores, npu_scores = create_common_tensor([np.float32, -1, (2, 3, 8, 8)], -3, 3)
        out = fuse_add_softmax_dropout(True, _Doubling(), npu_mask, npu_scores, 64, p=0.5)
        self.assertRtolEqual((2 * _add_softmax64(cpu_mask, cpu_scores, 64)).float(), out.cpu())

    def test_fused_path(self):
        shape = (1, 32, 128, 16)  # H = 128 and N * C = 32: Ascend's fused kernel
        cpu_mask, npu_mask = create_common_tensor([np.float32, -1, shape], -1, 1)
        cpu_scores, npu_scores = create_common_tensor([np.float32, -1, shape], -3, 3)
        expected = _add_softmax64(cpu_mask, cpu_scores, 64).float()
        # not training: no dropout, and the module is not called
        out = fuse_add_softmax_dropout(False, _Doubling(), npu_mask, npu_scores, 64, p=0.5)
        self.assertRtolEqual(expected, out.cpu())
        dropped = fuse_add_softmax_dropout(True, _Doubling(), npu_mask, npu_scores, 64, p=0.5).cpu()
        kept = dropped != 0
        self.assertLess(abs(kept.float().mean().item() - 0.5), 0.02)
        self.assertRtolEqual(expected[kept] / 0.5, dropped[kept])

    def test_bad_inputs(self):
        scores = torch.randn(1, 32, 128, 16).npu()
        with self.assertRaisesRegex(ValueError, r"\(N, C, H, W\)"):
            fuse_add_softmax_dropout(True, _Doubling(), scores[0], scores[0], 64)
        with self.assertRaisesRegex(ValueError, "dim=1 is not supported"):
            fuse_add_softmax_dropout(True, _Doubling(), scores, scores, 64, dim=1)
        with self.assertRaisesRegex(ValueError, "expand the mask"):
            fuse_add_softmax_dropout(True, _Doubling(), scores[:, :, :1], scores, 64)


# --- fused attention -------------------------------------------------------------------------

HIDDEN, BATCH, SEQ = 768, 2, 16


def _attention64(x, mask, kernels, biases, scale):
    def heads(t):
        return t.reshape(BATCH, SEQ, HIDDEN // 64, 64).permute(0, 2, 1, 3)

    q, k, v = (heads(x @ w + b) for w, b in zip(kernels, biases))
    probs = F.softmax(q @ k.transpose(-1, -2) * scale + mask, dim=-1)
    return (probs @ v).permute(0, 2, 1, 3).reshape(BATCH * SEQ, HIDDEN)


class TestFusedAttention(TestCase):
    def _inputs(self):
        hidden = torch.randn(BATCH * SEQ, HIDDEN)
        mask = torch.zeros(BATCH, 1, SEQ, SEQ)
        mask[1, :, :, SEQ - 4:] = -10000.0  # the second sequence is padded
        kernels = [torch.randn(HIDDEN, HIDDEN) / math.sqrt(HIDDEN) for _ in range(3)]
        biases = [torch.randn(HIDDEN) * 0.1 for _ in range(3)]
        return hidden, mask, kernels, biases

    @staticmethod
    def _npu_leaves(tensors):
        return [t.npu().requires_grad_() for t in tensors]

    def test_npu_fused_attention_forward_and_backward(self):
        hidden, mask, kernels, biases = self._inputs()
        leaves = self._npu_leaves([hidden] + kernels + biases)
        h, wq, wk, wv, bq, bk, bv = leaves
        nz = [torch_npu.npu_format_cast(t, 29) for t in (h, mask.npu(), wq, wk, wv)]
        out = npu_fused_attention(*nz, bq, bk, bv, scale=0.125, keep_prob=1.0)
        grad = torch.randn(BATCH * SEQ, HIDDEN)
        out.backward(grad.npu())

        ref_leaves = [t.double().requires_grad_() for t in [hidden] + kernels + biases]
        rh, rwq, rwk, rwv, rbq, rbk, rbv = ref_leaves
        expected = _attention64(rh, mask.double(), [rwq, rwk, rwv], [rbq, rbk, rbv], 0.125)
        expected.backward(grad.double())
        self.assertRtolEqual(expected.detach().float(), out.detach().cpu())
        for npu_leaf, ref_leaf in zip(leaves, ref_leaves):
            self.assertRtolEqual(ref_leaf.grad.float(), npu_leaf.grad.cpu(), prec=1e-3)

    def test_npu_fused_attention_with_layernorm(self):
        hidden, mask, kernels, biases = self._inputs()
        gamma, beta = torch.rand(HIDDEN) + 0.5, torch.randn(HIDDEN) * 0.1
        leaves = self._npu_leaves([hidden, gamma, beta])
        h, g, b = leaves
        nz = [torch_npu.npu_format_cast(t, 29) for t in [h, mask.npu()] + [k.npu() for k in kernels]]
        context, norm = npu_fused_attention_with_layernorm(*nz, *[x.npu() for x in biases], g, b, 0.125, 1.0)
        (context.sum() + norm.sum()).backward()

        rh, rg, rb = (t.double().requires_grad_() for t in (hidden, gamma, beta))
        ref_norm = F.layer_norm(rh, (HIDDEN,), rg, rb, eps=1e-5)
        ref_context = _attention64(ref_norm, mask.double(), [k.double() for k in kernels],
                                   [x.double() for x in biases], 0.125)
        (ref_context.sum() + ref_norm.sum()).backward()
        self.assertRtolEqual(ref_norm.detach().float(), norm.detach().cpu())
        self.assertRtolEqual(ref_context.detach().float(), context.detach().cpu())
        for npu_leaf, ref_leaf in zip(leaves, (rh, rg, rb)):
            self.assertRtolEqual(ref_leaf.grad.float(), npu_leaf.grad.cpu(), prec=1e-3)

    def test_fused_attention_bad_inputs(self):
        hidden, mask, kernels, biases = self._inputs()
        nz = [torch_npu.npu_format_cast(t.npu(), 29) for t in [hidden, mask] + kernels]
        nd_biases = [x.npu() for x in biases]
        with self.assertRaisesRegex(ValueError, "keep_prob=0 must be in"):
            npu_fused_attention(*nz, *nd_biases)  # the listed default keeps nothing
        with self.assertRaisesRegex(RuntimeError, "format not matches: hidden_states"):
            npu_fused_attention(hidden.npu(), *nz[1:], *nd_biases, keep_prob=1.0)
        with self.assertRaisesRegex(RuntimeError, "shape of hidden_states not matches"):
            npu_fused_attention(nz[0][:30], *nz[1:], *nd_biases, keep_prob=1.0)
        with self.assertRaisesRegex(RuntimeError, "shape of attention_mask not matches"):
            npu_fused_attention(nz[0], nz[1][:, :, :1], *nz[2:], *nd_biases, keep_prob=1.0)
        with self.assertRaisesRegex(TypeError, "npu_fused_attention_with_layernorm"):
            npu_fused_attention_with_layernorm(*nz, *nd_biases)  # gamma and beta missing


# --- the IoU family (deprecated on Ascend) ----------------------------------------------------

def _xywh_to_xyxy64(b):
    b = b.double()
    return torch.stack([b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2])


def _paired_terms64(a, b):
    """IoU, enclosing box and centre distance of paired column boxes (4, n) [x1, y1, x2, y2]."""
    inter = (torch.minimum(a[2], b[2]) - torch.maximum(a[0], b[0])).clamp_min(0) * (
        torch.minimum(a[3], b[3]) - torch.maximum(a[1], b[1])).clamp_min(0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    ew = torch.maximum(a[2], b[2]) - torch.minimum(a[0], b[0])
    eh = torch.maximum(a[3], b[3]) - torch.minimum(a[1], b[1])
    rho2 = ((a[0] + a[2] - b[0] - b[2]) / 2) ** 2 + ((a[1] + a[3] - b[1] - b[3]) / 2) ** 2
    return inter / union, union, ew, eh, rho2


@pytest.mark.filterwarnings("ignore:torch_npu.contrib.*deprecated:FutureWarning")
class TestIou(TestCase):
    def test_npu_iou_every_pair(self):
        from torch_npu.contrib import npu_iou, npu_ptiou

        a, b = _boxes(5), _boxes(3)
        inter = (torch.minimum(a[:, None, 2:], b[None, :, 2:]) - torch.maximum(a[:, None, :2], b[None, :, :2]))
        inter = inter.double().clamp_min(0).prod(-1)
        area = lambda x: (x[:, 2:] - x[:, :2]).double().prod(-1)  # noqa: E731
        expected = (inter / (area(a)[:, None] + area(b)[None] - inter)).float()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = npu_iou(a.npu(), b.npu(), mode="iou")
        self.assertTrue(any(issubclass(w.category, FutureWarning) and "deprecated" in str(w.message) for w in caught))
        self.assertEqual(tuple(out.shape), (5, 3))
        self.assertRtolEqual(expected, out.cpu())
        self.assertRtolEqual(expected, npu_ptiou(a.half().npu(), b.half().npu()).cpu())  # ptiou, float32 out
        normalised = npu_iou((a / 100).npu(), (b / 100).npu(), is_normalized=True, normalized_scale=100.)
        self.assertRtolEqual(expected, normalised.cpu(), prec=1e-3)
        with self.assertRaisesRegex(ValueError, "Expected mode in"):
            npu_iou(a.npu(), b.npu(), mode="giou")

    def test_npu_giou_diou_ciou(self):
        from torch_npu.contrib.function import npu_ciou, npu_diou, npu_giou

        xywh1 = torch.cat([torch.rand(6, 2) * 10, torch.rand(6, 2) * 4 + 1], 1)
        xywh2 = xywh1 + torch.randn(6, 4) * 0.5
        a, b = _xywh_to_xyxy64(xywh1.t()), _xywh_to_xyxy64(xywh2.t())
        iou, union, ew, eh, rho2 = _paired_terms64(a, b)
        giou = iou - (ew * eh - union) / (ew * eh)
        diou = iou - rho2 / (ew ** 2 + eh ** 2)
        v = 4 / math.pi ** 2 * (torch.atan((b[2] - b[0]) / (b[3] - b[1])) - torch.atan((a[2] - a[0]) / (a[3] - a[1]))) ** 2
        ciou = diou - v / (1 - iou + v) * v
        self.assertRtolEqual(giou.float(), npu_giou(xywh1.npu(), xywh2.npu()).cpu().reshape(-1))
        self.assertRtolEqual(diou.float(), npu_diou(xywh1.t().npu(), xywh2.t().npu()).cpu().reshape(-1))
        self.assertRtolEqual(ciou.float(), npu_ciou(xywh1.t().npu(), xywh2.t().npu()).cpu().reshape(-1))
        with self.assertRaisesRegex(ValueError, "boxes1.shape == boxes2.shape"):
            npu_giou(xywh1.npu(), xywh2[:3].npu())


class TestContribReexports(TestCase):
    def test_contrib_names_are_the_function_objects(self):
        import torch_npu.contrib as contrib
        import torch_npu.contrib.function as function

        self.assertEqual(len(contrib.CONTRIB_FUNCTIONS), 12)
        for name in contrib.CONTRIB_FUNCTIONS:
            self.assertIs(getattr(contrib, name), getattr(function, name))


if __name__ == "__main__":
    run_tests()
