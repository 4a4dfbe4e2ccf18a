"""npu_conv3d, npu_deformable_conv2d, npu_roi_align and npu_ps_roi_pooling against float64
references written element by element from Ascend's formulas (forward and backward),
Ascend's documented examples, argument errors and opcheck."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from npu_ops_compare import assert_close, opcheck

import torch_npu


def test_npu_conv3d_forward_and_backward():
    x0, w0, b0 = torch.randn(2, 4, 5, 6, 6), torch.randn(6, 2, 3, 3, 3), torch.randn(6)
    x, w, b = (t.npu().requires_grad_(True) for t in (x0, w0, b0))
    xr, wr, br = (t.double().requires_grad_(True) for t in (x0, w0, b0))
    out = torch_npu.npu_conv3d(x, w, b, [1, 2, 1], [1, 1, 0], [1, 1, 2], 2)
    ref = F.conv3d(xr, wr, br, [1, 2, 1], [1, 1, 0], [1, 1, 2], 2)
    assert_close(out, ref, torch.float32, scale=10)
    seed = torch.randn(ref.shape)
    out.backward(seed.npu())
    ref.backward(seed.double())
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        assert_close(got, want, torch.float32, scale=20)


def bilinear_zero_outside(img, y, x):
    """img (H, W) read at tensor positions y, x (differentiable in all three); corners outside
    the image count as zero; floor-based corners (mmcv / torchvision deform conv)."""
    h, w = img.shape
    y0, x0 = math.floor(float(y.detach())), math.floor(float(x.detach()))
    total = img.new_zeros(())
    for p in (y0, y0 + 1):
        for q in (x0, x0 + 1):
            if 0 <= p < h and 0 <= q < w:
                total = total + img[p, q] * (1 - (y - p).abs()) * (1 - (x - q).abs())
    return total


def deformable_reference(x, weight, offset, bias, k, stride, pad, dil, dg, modulated):
    n, c, h, w = x.shape
    kh, kw = k
    kk = kh * kw
    oh = (h + pad[0] + pad[1] - ((kh - 1) * dil[2] + 1)) // stride[2] + 1
    ow = (w + pad[2] + pad[3] - ((kw - 1) * dil[3] + 1)) // stride[3] + 1
    cols = []
    for b in range(n):
        per_c = []
        for ch in range(c):
            g = ch // (c // dg)
            rows = []
            for i in range(oh):
                for j in range(ow):
                    for a in range(kh):
                        for e in range(kw):
                            kidx = a * kw + e
                            dx = offset[b, g * kk + kidx, i, j]
                            dy = offset[b, dg * kk + g * kk + kidx, i, j]
                            yy = i * stride[2] - pad[0] + a * dil[2] + dy
                            xx = j * stride[3] - pad[2] + e * dil[3] + dx
                            v = bilinear_zero_outside(x[b, ch], yy, xx)
                            if modulated:
                                v = v * offset[b, 2 * dg * kk + g * kk + kidx, i, j]
                            rows.append(v)
            per_c.append(torch.stack(rows).reshape(oh, ow, kh, kw))
        cols.append(torch.stack(per_c))
    patches = torch.stack(cols)  # (N, C, oh, ow, kh, kw)
    return torch.einsum("ncijab,ocab->noij", patches, weight) + (0 if bias is None else bias.view(1, -1, 1, 1))


@pytest.mark.parametrize("modulated", [True, False])
def test_npu_deformable_conv2d_forward_and_backward(modulated):
    g = torch.Generator().manual_seed(int(modulated))
    x0 = torch.randn(1, 2, 5, 5, generator=g)
    w0 = torch.randn(3, 2, 3, 3, generator=g)
    b0 = torch.randn(3, generator=g)
    blocks = 3 if modulated else 2
    off0 = torch.randn(1, blocks * 9, 5, 5, generator=g) * 0.8
    if modulated:
        off0[:, 18:] = torch.rand(1, 9, 5, 5, generator=g)
    args = ([3, 3], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1])
    x, w, off, b = (t.npu().requires_grad_(True) for t in (x0, w0, off0, b0))
    out, deform_out = torch_npu.npu_deformable_conv2d(x, w, off, b, *args, groups=1, deformable_groups=1, modulated=modulated)
    assert deform_out.shape == (1, 2, 15, 15)
    xr, wr, offr, br = (t.double().requires_grad_(True) for t in (x0, w0, off0, b0))
    ref = deformable_reference(xr, wr, offr, br, [3, 3], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], 1, modulated)
    assert_close(out, ref, torch.float32, scale=10)
    seed = torch.randn(ref.shape, generator=g)
    out.backward(seed.npu())
    ref.backward(seed.double())
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (off.grad, offr.grad), (b.grad, br.grad)):
        assert_close(got, want, torch.float32, scale=50)


def test_deformable_conv2d_with_zero_offsets_is_conv2d():
    x, w = torch.randn(2, 4, 7, 6), torch.randn(6, 2, 3, 3)
    off = torch.zeros(2, 2 * 9 * 3, 4, 3)
    off[:, 2 * 18:] = 1
    out, _ = torch_npu.npu_deformable_conv2d(x.npu(), w.npu(), off.npu(), None, [3, 3], [1, 1, 2, 2], [1, 1, 1, 1],
                                             groups=2, deformable_groups=2)
    assert_close(out, F.conv2d(x.double(), w.double(), stride=2, padding=1, groups=2), torch.float32, scale=10)


def roi_align_bilinear(plane, y, x):
    h, w = len(plane), len(plane[0])
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y_low, x_low = int(y), int(x)
    if y_low >= h - 1:
        y_high = y_low = h - 1
        y = float(y_low)
    else:
        y_high = y_low + 1
    if x_low >= w - 1:
        x_high = x_low = w - 1
        x = float(x_low)
    else:
        x_high = x_low + 1
    ly, lx = y - y_low, x - x_low
    return ((1 - ly) * (1 - lx) * plane[y_low][x_low] + (1 - ly) * lx * plane[y_low][x_high]
            + ly * (1 - lx) * plane[y_high][x_low] + ly * lx * plane[y_high][x_high])


def roi_align_reference(x, rois, scale, ph, pw, sample_num, end_mode):
    out = torch.zeros(len(rois), x.shape[1], ph, pw, dtype=torch.float64)
    for r, (bi, x1, y1, x2, y2) in enumerate(rois.tolist()):
        sx, sy = x1 * scale, y1 * scale
        rw = max((x2 + end_mode) * scale - sx, 1.0)
        rh = max((y2 + end_mode) * scale - sy, 1.0)
        bh, bw = rh / ph, rw / pw
        gh = sample_num or math.ceil(bh)
        gw = sample_num or math.ceil(bw)
        for c in range(x.shape[1]):
            plane = x[int(bi), c].tolist()
            for i in range(ph):
                for j in range(pw):
                    acc = 0.0
                    for a in range(gh):
                        for e in range(gw):
                            acc += roi_align_bilinear(plane, sy + i * bh + (a + 0.5) * bh / gh, sx + j * bw + (e + 0.5) * bw / gw)
                    out[r, c, i, j] = acc / (gh * gw)
    return out


@pytest.mark.parametrize("sample_num,end_mode", [(2, 0), (0, 1), (3, 1)])
def test_npu_roi_align_against_reference(sample_num, end_mode):
    x = torch.randn(2, 3, 10, 12)
    rois = torch.tensor([[0, 1.0, 2.0, 30.0, 25.0], [1, -4.0, 0.5, 10.0, 44.0], [1, 20.0, 20.0, 21.0, 21.0]])
    out = torch_npu.npu_roi_align(x.npu(), rois.npu(), 0.25, 3, 4, sample_num, end_mode)
    assert out.shape == (3, 3, 3, 4)
    assert_close(out, roi_align_reference(x.double(), rois, 0.25, 3, 4, sample_num, end_mode), torch.float32, scale=10)


def test_npu_roi_align_ascend_documented_example():
    x = torch.arange(1, 37, dtype=torch.float32).reshape(1, 1, 6, 6)
    rois = torch.tensor([[0, -2.0, -2.0, 22.0, 22.0]])
    out = torch_npu.npu_roi_align(x.npu(), rois.npu(), 0.25, 3, 3, 2, 0)
    assert_close(out, roi_align_reference(x.double(), rois, 0.25, 3, 3, 2, 0), torch.float32)
    # Ascend's documented values
    assert out.cpu().flatten().tolist() == [4.5, 6.5, 8.5, 16.5, 18.5, 20.5, 28.5, 30.5, 32.5]


def ps_roi_reference(x, rois, scale, group, dim):
    table = rois.permute(0, 2, 1).reshape(-1, 5).tolist()
    outs = []
    for bi, x1, y1, x2, y2 in table:
        sw, sh = round(x1) * scale, round(y1) * scale
        ew, eh = (round(x2) + 1) * scale, (round(y2) + 1) * scale
        bw, bh = max(ew - sw, 0.1) / group, max(eh - sh, 0.1) / group
        roi = []
        for c in range(dim):
            for i in range(group):
                for j in range(group):
                    hs = min(max(math.floor(i * bh + sh), 0), x.shape[2])
                    he = min(max(math.ceil((i + 1) * bh + sh), 0), x.shape[2])
                    ws = min(max(math.floor(j * bw + sw), 0), x.shape[3])
                    we = min(max(math.ceil((j + 1) * bw + sw), 0), x.shape[3])
                    if he <= hs or we <= ws or not 0 <= int(bi) < x.shape[0]:
                        roi.append(x.new_zeros(()))
                    else:
                        roi.append(x[int(bi), (c * group + i) * group + j, hs:he, ws:we].mean())
        outs.append(torch.stack(roi).reshape(dim, group, group))
    return torch.stack(outs)


def test_npu_ps_roi_pooling_forward_and_backward():
    x0 = torch.randn(2, 3 * 4, 9, 11)
    rois = torch.tensor([[[0, 1.0], [1.0, 0.0], [2.0, 3.0], [30.0, 20.0], [25.0, 33.0]],
                         [[1, 0.0], [-3.0, 8.0], [4.0, 8.0], [18.0, 9.0], [40.0, 9.4]]])
    x = x0.npu().requires_grad_(True)
    out = torch_npu.npu_ps_roi_pooling(x, rois.npu(), 0.25, 2, 3)
    xr = x0.double().requires_grad_(True)
    ref = ps_roi_reference(xr, rois, 0.25, 2, 3)
    assert out.shape == (4, 3, 2, 2)
    assert_close(out, ref, torch.float32)
    seed = torch.randn(ref.shape)
    out.backward(seed.npu())
    ref.backward(seed.double())
    assert_close(x.grad, xr.grad, torch.float32)


def test_ps_roi_pooling_ascend_documented_example():
    roi = torch.tensor([[[1], [2], [3], [4], [5]], [[6], [7], [8], [9], [10]]], dtype=torch.float16)
    x = torch.arange(1, 17, dtype=torch.float16).reshape(2, 8, 1, 1)
    out = torch_npu.npu_ps_roi_pooling(x.npu(), roi.npu(), 0.5, 2, 2)
    assert out.shape == (2, 2, 2, 2)
    assert_close(out, ps_roi_reference(x.double(), roi.double(), 0.5, 2, 2), torch.float16)


def test_errors_and_opcheck():
    with pytest.raises(ValueError, match=r"offset must have shape \(1, 27, 4, 4\)"):
        torch_npu.npu_deformable_conv2d(torch.randn(1, 2, 4, 4, device="npu"), torch.randn(2, 2, 3, 3, device="npu"),
                                        torch.randn(1, 18, 4, 4, device="npu"), None, [3, 3], [1, 1, 1, 1], [1, 1, 1, 1])
    with pytest.raises(ValueError, match="roi_end_mode=2"):
        torch_npu.npu_roi_align(torch.randn(1, 1, 4, 4, device="npu"), torch.zeros(1, 5, device="npu"), 1.0, 2, 2, 2, 2)
    with pytest.raises(ValueError, match="output_dim \\* group_size\\*\\*2 = 8 channels"):
        torch_npu.npu_ps_roi_pooling(torch.randn(1, 6, 4, 4, device="npu"), torch.zeros(1, 5, 1, device="npu"), 1.0, 2, 2)
    x = torch.randn(1, 2, 4, 4, device="npu")
    opcheck(torch.ops.npu.npu_conv3d.default, (torch.randn(1, 2, 3, 4, 4, device="npu", requires_grad=True), torch.randn(3, 2, 2, 2, 2, device="npu"), None, [1, 1, 1], [0, 0, 0], [1, 1, 1], 1))
    opcheck(torch.ops.npu.npu_deformable_conv2d.default, (x.requires_grad_(True), torch.randn(2, 2, 3, 3, device="npu"), torch.rand(1, 27, 4, 4, device="npu"), None, [3, 3], [1, 1, 1, 1], [1, 1, 1, 1]))
    opcheck(torch.ops.npu.npu_roi_align.default, (x.detach(), torch.tensor([[0, 0.0, 0.0, 3.0, 3.0]], device="npu"), 1.0, 2, 2, 2, 1))
    opcheck(torch.ops.npu.npu_ps_roi_pooling.default, (torch.randn(1, 8, 4, 4, device="npu", requires_grad=True), torch.tensor([[[0.0], [0.0], [0.0], [3.0], [3.0]]], device="npu"), 1.0, 2, 2))
