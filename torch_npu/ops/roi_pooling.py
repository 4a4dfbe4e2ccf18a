"""Region-of-interest pooling as Ascend detection code calls it: ``npu_roi_align`` and
``npu_ps_roi_pooling`` (position-sensitive, R-FCN), the latter with its backward.

Semantics (Ascend documentation and its worked examples):

* ``npu_roi_align(features (N, C, H, W), rois (R, 5), spatial_scale, pooled_height,
  pooled_width, sample_num, roi_end_mode)``: rois are ``[batch_index, x1, y1, x2, y2]``; the
  region runs from ``x1 * spatial_scale`` to ``x2 * spatial_scale`` (``roi_end_mode=0``) or
  to ``(x2 + 1) * spatial_scale`` (``roi_end_mode=1``, the legacy convention), at least 1 wide;
  each of the ``pooled_height x pooled_width`` bins averages ``sample_num x sample_num``
  bilinear samples (``sample_num=0``: ``ceil(bin size)`` per side), read as torchvision's
  ``roi_align`` (``aligned=False``) reads them. Result ``(R, C, pooled_height, pooled_width)``.
* ``npu_ps_roi_pooling(x (N, output_dim * group_size**2, H, W), rois (B, 5, R), spatial_scale,
  group_size, output_dim)``: per roi ``[batch_index, x1, y1, x2, y2]``, the region
  ``round(x1) * scale .. (round(x2) + 1) * scale`` (at least 0.1) is split into
  ``group_size x group_size`` bins; bin ``(i, j)`` of output channel ``c`` averages channel
  ``(c * group_size + i) * group_size + j`` over the pixels ``floor(start) .. ceil(end)`` of
  the bin (0 for an empty bin, and for a roi whose batch index names no image). Result ``(B * R, output_dim, group_size, group_size)``. Its
  backward (``npu_ps_roi_pooling_backward``) spreads each gradient evenly over its bin.

Arithmetic is float32, rounded once to the features' dtype.
"""
from __future__ import annotations

import math

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._formula_backward import vjp
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_roi_align", "npu_ps_roi_pooling"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions


# --- npu_roi_align -------------------------------------------------------------------------

def _check_roi_align_args(features, rois, pooled_height, pooled_width, sample_num, roi_end_mode) -> None:
    op = "npu_roi_align"
    check.tensor(op, "self", features)
    check.tensor(op, "rois", rois)
    check.dtype(op, "self", features, check.FLOATING)
    check.rank(op, "self", features, (4,))
    if rois.dim() != 2 or rois.shape[1] != 5:
        raise ValueError(f"{op}: rois must have shape (num_rois, 5): [batch_index, x1, y1, x2, y2], got {tuple(rois.shape)}")
    if pooled_height <= 0 or pooled_width <= 0:
        raise ValueError(f"{op}: pooled_height and pooled_width must be positive, got {pooled_height}, {pooled_width}")
    if sample_num < 0:
        raise ValueError(f"{op}: sample_num={sample_num} must be non-negative (0: adaptive)")
    check.choice(op, "roi_end_mode", roi_end_mode, (0, 1))


def _bilinear_samples(plane, y, x):
    """torchvision's roi_align bilinear read of ``plane`` (C, H, W) at ``y`` (Py,), ``x`` (Px,)."""
    _c, h, w = plane.shape
    y = y[:, None].expand(-1, x.shape[0])
    x = x[None, :].expand(y.shape[0], -1)
    outside = (y < -1.0) | (y > h) | (x < -1.0) | (x > w)
    y, x = y.clamp_min(0), x.clamp_min(0)
    y_low, x_low = y.floor().long().clamp(max=h - 1), x.floor().long().clamp(max=w - 1)
    y_high, x_high = (y_low + 1).clamp(max=h - 1), (x_low + 1).clamp(max=w - 1)
    y = torch.where(y_low >= h - 1, y_low.to(y.dtype), y)
    x = torch.where(x_low >= w - 1, x_low.to(x.dtype), x)
    ly, lx = y - y_low, x - x_low
    hy, hx = 1 - ly, 1 - lx
    value = (plane[:, y_low, x_low] * (hy * hx) + plane[:, y_low, x_high] * (hy * lx)
             + plane[:, y_high, x_low] * (ly * hx) + plane[:, y_high, x_high] * (ly * lx))
    return torch.where(outside, torch.zeros_like(value), value)  # (C, Py, Px)


def _roi_align(self, rois, spatial_scale: float, pooled_height: int, pooled_width: int, sample_num: int,
               roi_end_mode: int):
    _check_roi_align_args(self, rois, pooled_height, pooled_width, sample_num, roi_end_mode)
    features = self.float()
    extra = 1.0 if roi_end_mode == 1 else 0.0
    outputs = []
    for batch_index, x1, y1, x2, y2 in rois.float().cpu().tolist():
        start_x, start_y = x1 * spatial_scale, y1 * spatial_scale
        roi_w = max((x2 + extra) * spatial_scale - start_x, 1.0)
        roi_h = max((y2 + extra) * spatial_scale - start_y, 1.0)
        bin_h, bin_w = roi_h / pooled_height, roi_w / pooled_width
        grid_h = sample_num if sample_num > 0 else math.ceil(bin_h)
        grid_w = sample_num if sample_num > 0 else math.ceil(bin_w)
        iy = (torch.arange(pooled_height * grid_h, device=self.device, dtype=torch.float32) + 0.5) / grid_h
        ix = (torch.arange(pooled_width * grid_w, device=self.device, dtype=torch.float32) + 0.5) / grid_w
        samples = _bilinear_samples(features[int(batch_index)], start_y + iy * bin_h, start_x + ix * bin_w)
        c = samples.shape[0]
        pooled = samples.reshape(c, pooled_height, grid_h, pooled_width, grid_w).mean(dim=(2, 4))
        outputs.append(pooled)
    if not outputs:
        return self.new_empty((0, self.shape[1], pooled_height, pooled_width))
    return torch.stack(outputs).to(self.dtype)


def _roi_align_fake(self, rois, spatial_scale: float, pooled_height: int, pooled_width: int, sample_num: int,
                    roi_end_mode: int):
    _check_roi_align_args(self, rois, pooled_height, pooled_width, sample_num, roi_end_mode)
    return self.new_empty((rois.shape[0], self.shape[1], pooled_height, pooled_width))


_family.define(
    "npu_roi_align(Tensor self, Tensor rois, float spatial_scale, int pooled_height, int pooled_width, int sample_num, "
    "int roi_end_mode) -> Tensor",
    kernel=_roi_align, fake=_roi_align_fake,
)


# --- npu_ps_roi_pooling --------------------------------------------------------------------

def _check_ps_args(x, rois, group_size, output_dim) -> None:
    op = "npu_ps_roi_pooling"
    check.tensor(op, "self", x)
    check.tensor(op, "rois", rois)
    check.dtype(op, "self", x, check.FLOATING)
    check.rank(op, "self", x, (4,))
    if not 0 < group_size < 128 or output_dim <= 0:
        raise ValueError(f"{op}: group_size={group_size} must be in (0, 128) and output_dim={output_dim} positive")
    if x.shape[1] != output_dim * group_size * group_size:
        raise ValueError(
            f"{op}: self must have output_dim * group_size**2 = {output_dim * group_size ** 2} channels, got {x.shape[1]}"
        )
    if rois.dim() != 3 or rois.shape[1] != 5:
        raise ValueError(f"{op}: rois must have shape (batch, 5, num_rois): [batch_index, x1, y1, x2, y2], got {tuple(rois.shape)}")


def _bin_masks(rois, spatial_scale, group_size, height, width, device):
    """Per roi: the bin row masks (R, G, H), column masks (R, G, W), bin areas (R, G, G) and
    the batch indices (R,)."""
    table = rois.float().permute(0, 2, 1).reshape(-1, 5).cpu()
    batch_index = table[:, 0].long()
    start_w = torch.round(table[:, 1]) * spatial_scale
    start_h = torch.round(table[:, 2]) * spatial_scale
    end_w = (torch.round(table[:, 3]) + 1) * spatial_scale
    end_h = (torch.round(table[:, 4]) + 1) * spatial_scale
    bin_w = (end_w - start_w).clamp_min(0.1) / group_size
    bin_h = (end_h - start_h).clamp_min(0.1) / group_size
    g = torch.arange(group_size, dtype=torch.float32)

    def masks(start, size, extent):
        lo = torch.floor(g[None] * size[:, None] + start[:, None]).clamp(0, extent)
        hi = torch.ceil((g[None] + 1) * size[:, None] + start[:, None]).clamp(0, extent)
        pos = torch.arange(extent, dtype=torch.float32)
        return ((pos[None, None] >= lo[..., None]) & (pos[None, None] < hi[..., None])).float(), (hi - lo).clamp_min(0)

    row_mask, rows = masks(start_h, bin_h, height)
    col_mask, cols = masks(start_w, bin_w, width)
    area = rows[:, :, None] * cols[:, None, :]
    return row_mask.to(device), col_mask.to(device), area.to(device), batch_index.to(device)


def _ps_formula(x, row_mask, col_mask, area, batch_index, group_size, output_dim):
    r = batch_index.shape[0]
    # A roi naming no image of the batch pools nothing (zeros), as on Ascend.
    valid = (batch_index >= 0) & (batch_index < x.shape[0])
    area = torch.where(valid[:, None, None], area, torch.zeros_like(area))
    per_roi = x[batch_index.clamp(0, x.shape[0] - 1)].reshape(r, output_dim, group_size, group_size, x.shape[2], x.shape[3])
    sums = torch.einsum("rcijhw,rih,rjw->rcij", per_roi, row_mask, col_mask)
    return torch.where(area[:, None] > 0, sums / area[:, None].clamp_min(1), torch.zeros_like(sums))


def _ps_roi_pooling(self, rois, spatial_scale: float, group_size: int, output_dim: int):
    _check_ps_args(self, rois, group_size, output_dim)
    masks = _bin_masks(rois, spatial_scale, group_size, self.shape[2], self.shape[3], self.device)
    return _ps_formula(self.float(), *masks, group_size, output_dim).to(self.dtype)


def _ps_roi_pooling_fake(self, rois, spatial_scale: float, group_size: int, output_dim: int):
    _check_ps_args(self, rois, group_size, output_dim)
    return self.new_empty((rois.shape[0] * rois.shape[2], output_dim, group_size, group_size))


def _ps_backward_shape(rois, input_size) -> list:
    """``input_size`` is Ascend's ``(H, W)`` (the batch then comes from the rois' largest batch
    index) or the whole ``(N, C, H, W)``."""
    if len(input_size) == 4:
        return list(input_size)
    if len(input_size) != 2:
        raise ValueError(f"npu_ps_roi_pooling_backward: input_size must be (H, W) or (N, C, H, W), got {list(input_size)}")
    batch = int(rois[:, 0].max().item()) + 1 if rois.numel() else 1
    return [batch, -1, *input_size]


def _ps_backward(output_grad, rois, spatial_scale: float, group_size: int, output_dim: int, input_size):
    shape = _ps_backward_shape(rois, input_size)
    shape[1] = output_dim * group_size * group_size
    masks = _bin_masks(rois, spatial_scale, group_size, shape[2], shape[3], output_grad.device)
    zeros = output_grad.new_zeros(shape)
    (grad,) = vjp(lambda x: _ps_formula(x, *masks, group_size, output_dim), (zeros,), output_grad)
    return grad


def _ps_backward_fake(output_grad, rois, spatial_scale: float, group_size: int, output_dim: int, input_size):
    if len(input_size) != 4:
        raise RuntimeError(
            "npu_ps_roi_pooling_backward: with input_size=(H, W) the batch size comes from the rois' "
            "values; pass the input's full shape (N, C, H, W) to trace it"
        )
    return output_grad.new_empty(input_size)


def _ps_setup_context(ctx, inputs, output) -> None:
    self, rois, spatial_scale, group_size, output_dim = inputs
    ctx.options = (spatial_scale, group_size, output_dim)
    ctx.input_shape = list(self.shape)
    ctx.save_for_backward(rois)


def _ps_autograd(ctx, grad):
    (rois,) = ctx.saved_tensors
    grad_input = torch.ops.npu.npu_ps_roi_pooling_backward(grad, rois, *ctx.options, ctx.input_shape)
    return grad_input, None, None, None, None


_family.define(
    "npu_ps_roi_pooling(Tensor self, Tensor rois, float spatial_scale, int group_size, int output_dim) -> Tensor",
    kernel=_ps_roi_pooling, fake=_ps_roi_pooling_fake, backward=_ps_autograd, setup_context=_ps_setup_context,
)
_family.define(
    "npu_ps_roi_pooling_backward(Tensor output_grad, Tensor rois, float spatial_scale, int group_size, int output_dim, "
    "SymInt[] input_size) -> Tensor",
    kernel=_ps_backward, fake=_ps_backward_fake,
)

npu_roi_align = torch.ops.npu.npu_roi_align
npu_ps_roi_pooling = torch.ops.npu.npu_ps_roi_pooling
