"""``ROIAlign`` (detectron2's layer; its ``aligned=True`` default), over the fused
``torch_npu.npu_roi_align`` with a backward.

For each roi ``[batch_index, x1, y1, x2, y2]`` the region is scaled by ``spatial_scale``,
split into ``output_size`` bins and each bin averages ``sampling_ratio x sampling_ratio``
bilinear samples (``sampling_ratio=0``: ``ceil(bin size)`` per side), as torchvision's
``roi_align`` reads them. ``aligned=False`` is the legacy convention (regions at least one
pixel wide), computed by the fused operator; ``aligned=True`` shifts the scaled region by
-0.5 pixel and keeps its true size, as torchvision's ``aligned=True`` does. The backward is
the exact gradient of that formula for the features.
"""
import math

import torch
from torch import nn
from torch.autograd import Function
from torch.nn.modules.utils import _pair

__all__ = ["ROIAlign"]


def _roi_align_formula(features, rois, output_size, spatial_scale, sampling_ratio, aligned):
    """The pooled ``(R, C, pooled_h, pooled_w)`` float32 result, differentiable in ``features``."""
    from torch_npu.ops.roi_pooling import _bilinear_samples

    pooled_h, pooled_w = output_size
    offset = 0.5 if aligned else 0.0
    features = features.float()
    outputs = []
    for batch_index, x1, y1, x2, y2 in rois.float().cpu().tolist():
        start_x, start_y = x1 * spatial_scale - offset, y1 * spatial_scale - offset
        roi_w, roi_h = x2 * spatial_scale - offset - start_x, y2 * spatial_scale - offset - start_y
        if not aligned:
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        bin_h, bin_w = roi_h / pooled_h, roi_w / pooled_w
        grid_h = sampling_ratio if sampling_ratio > 0 else max(math.ceil(bin_h), 1)
        grid_w = sampling_ratio if sampling_ratio > 0 else max(math.ceil(bin_w), 1)
        iy = (torch.arange(pooled_h * grid_h, device=features.device, dtype=torch.float32) + 0.5) / grid_h
        ix = (torch.arange(pooled_w * grid_w, device=features.device, dtype=torch.float32) + 0.5) / grid_w
        samples = _bilinear_samples(features[int(batch_index)], start_y + iy * bin_h, start_x + ix * bin_w)
        outputs.append(samples.reshape(samples.shape[0], pooled_h, grid_h, pooled_w, grid_w).mean(dim=(2, 4)))
    if not outputs:
        return features.new_zeros((0, features.shape[1], pooled_h, pooled_w))
    return torch.stack(outputs)


class _ROIAlignFunction(Function):
    @staticmethod
    def forward(ctx, input_tensor, rois, output_size, spatial_scale, sampling_ratio, aligned):
        import torch_npu

        ctx.options = (output_size, spatial_scale, sampling_ratio, aligned)
        ctx.save_for_backward(input_tensor, rois)
        if aligned:
            return _roi_align_formula(input_tensor, rois, output_size, spatial_scale, sampling_ratio, True)
        return torch_npu.npu_roi_align(input_tensor, rois, spatial_scale, output_size[0], output_size[1],
                                       sampling_ratio, 0)

    @staticmethod
    def backward(ctx, grad_output):
        input_tensor, rois = ctx.saved_tensors
        with torch.enable_grad():
            features = input_tensor.detach().requires_grad_(True)
            pooled = _roi_align_formula(features, rois, *ctx.options)
            (grad_input,) = torch.autograd.grad(pooled, features, grad_output)
        return grad_input, None, None, None, None, None


class ROIAlign(nn.Module):
    """Args: ``output_size`` (h, w) or one int, ``spatial_scale`` (feature map / image),
    ``sampling_ratio`` (samples per bin side; 0 = adaptive), ``aligned`` (half-pixel shift).
    ``forward(input_tensor (N, C, H, W), rois (R, 5))`` returns ``(R, C, h, w)`` float32."""

    def __init__(self, output_size, spatial_scale, sampling_ratio, aligned=True):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned

    def forward(self, input_tensor, rois):
        if rois.dim() != 2 or rois.size(1) != 5:
            raise ValueError(f"ROIAlign: rois must have shape (R, 5): [batch_index, x1, y1, x2, y2], got "
                             f"{tuple(rois.shape)}")
        if input_tensor.dim() != 4:
            raise ValueError(f"ROIAlign: input_tensor must be NCHW, got {tuple(input_tensor.shape)}")
        if self.sampling_ratio < 0:
            raise ValueError(f"ROIAlign: sampling_ratio={self.sampling_ratio} must be >= 0 (0: adaptive)")
        return _ROIAlignFunction.apply(input_tensor.float(), rois, _pair(self.output_size), self.spatial_scale,
                                       self.sampling_ratio, self.aligned)

    def __repr__(self):
        return (f"{type(self).__name__}(output_size={self.output_size}, spatial_scale={self.spatial_scale}, "
                f"sampling_ratio={self.sampling_ratio}, aligned={self.aligned})")
