"""``Focus`` of YOLOv5 (space-to-depth, then a convolution) and the ``Conv`` block it uses.

The four pixel phases of the image (even/odd rows times even/odd columns) are stacked as
channels, as YOLOv5's ``Focus`` stacks them, then convolved with Conv2d + BatchNorm +
LeakyReLU(0.1).
"""
import torch
from torch import nn

__all__ = ["Conv", "Focus", "autopad", "fast_slice"]


def autopad(k, p=None):
    """The 'same' padding of a kernel of size ``k`` when ``p`` is None, else ``p``."""
    if p is None:
        p = k // 2 if isinstance(k, int) else [x // 2 for x in k]
    return p


class Conv(nn.Module):
    """Conv2d (no bias) + BatchNorm2d + LeakyReLU(0.1) (identity when ``act`` is False)."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p), groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.LeakyReLU(0.1, inplace=True) if act else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))

    def fuseforward(self, x):
        """The block once BatchNorm has been folded into the convolution's weights."""
        return self.act(self.conv(x))


def fast_slice(x):
    """The four pixel phases of an NCHW ``x``: rows even/odd x columns even/odd, in YOLOv5's
    order ``[(0, 0), (1, 0), (0, 1), (1, 1)]`` (row phase, column phase). An odd height or
    width drops its last row or column, so the four have one shape."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"Focus: the input must be an NCHW Tensor, got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    h, w = x.shape[2] // 2 * 2, x.shape[3] // 2 * 2
    return [x[..., 0:h:2, 0:w:2], x[..., 1:h:2, 0:w:2], x[..., 0:h:2, 1:w:2], x[..., 1:h:2, 1:w:2]]


class Focus(nn.Module):
    """Space-to-depth (``c1`` -> ``4 * c1`` channels at half the resolution), then ``Conv``."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = Conv(c1 * 4, c2, k, s, p, g, act)

    def forward(self, x):
        return self.conv(torch.cat(fast_slice(x), 1))
