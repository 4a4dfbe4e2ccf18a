"""``DropoutWithByteMask``: dropout with an explicit uint8 keep-mask.

Ascend's variant draws a byte mask (1 = keep) and applies it in a fused kernel, which pays
off in graph mode; here the mask is drawn from the device generator and applied by
multiplication, the same numbers a byte-mask dropout produces.
"""
from torch.nn import Module

from ._keep_masks import apply_keep_mask, check_probability, draw_keep_mask

__all__ = ["DropoutWithByteMask"]


class DropoutWithByteMask(Module):
    """Args: ``p`` (probability of an element to be zeroed, default 0.5), ``inplace`` (write
    into the input), ``max_seed`` (the range of the real kernel's seeds; kept for
    compatibility: the generator's state is what makes a run reproducible here)."""

    def __init__(self, p=0.5, inplace=False, max_seed=2 ** 10 - 1):
        super().__init__()
        self.p = check_probability("DropoutWithByteMask", p)
        self.inplace = inplace
        self.max_seed = max_seed

    def forward(self, input1):
        if not self.training or self.p == 0.0:
            return input1
        mask = draw_keep_mask(input1.shape, self.p, input1.device)
        if self.inplace:
            return input1.copy_(apply_keep_mask(input1, mask, self.p))
        return apply_keep_mask(input1, mask, self.p)
