"""``PSROIPool``: R-FCN's position-sensitive roi pooling, over the fused
``torch_npu.npu_ps_roi_pooling`` (which has its backward).

``features`` has ``output_dim * group_size**2`` channels; ``rois`` is ``(batch, 5, num_rois)``
of ``[batch_index, x1, y1, x2, y2]``; the result is ``(batch * num_rois, output_dim,
group_size, group_size)``: bin ``(i, j)`` of output channel ``c`` averages channel
``(c * group_size + i) * group_size + j`` over the bin.
"""
from torch import nn

__all__ = ["PSROIPool"]


class PSROIPool(nn.Module):
    """Args: ``pooled_height``/``pooled_width`` (must equal ``group_size``, the operator pools
    one bin per group), ``spatial_scale``, ``group_size``, ``output_dim``."""

    def __init__(self, pooled_height=7, pooled_width=7, spatial_scale=1 / 16.0, group_size=7, output_dim=22):
        super().__init__()
        if pooled_height != group_size or pooled_width != group_size:
            raise ValueError(f"PSROIPool: pooled_height={pooled_height} and pooled_width={pooled_width} must equal "
                             f"group_size={group_size}")
        self.pooled_height = int(pooled_height)
        self.pooled_width = int(pooled_width)
        self.spatial_scale = float(spatial_scale)
        self.group_size = int(group_size)
        self.output_dim = int(output_dim)

    def forward(self, features, rois):
        import torch_npu

        return torch_npu.npu_ps_roi_pooling(features, rois, self.spatial_scale, self.group_size, self.output_dim)

    def __repr__(self):
        return (f"{type(self).__name__}(pooled_height={self.pooled_height}, pooled_width={self.pooled_width}, "
                f"spatial_scale={self.spatial_scale}, group_size={self.group_size}, output_dim={self.output_dim})")
