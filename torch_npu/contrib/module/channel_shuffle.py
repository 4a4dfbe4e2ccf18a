"""``ChannelShuffle`` of ShuffleNetV2, written as index selections.

torchvision shuffles channels with ``view -> transpose -> contiguous`` and then splits with
``chunk``; Ascend's version (which model code imports under this name) concatenates the two
branch tensors and picks channels with ``index_select``, and its backward picks the gradients
back with the inverse permutation. The same two autograd functions are public here, as in the
real package, and work for any number of groups (the permutation is computed, not assumed).
"""
import torch
from torch import nn

__all__ = [
    "ChannelShuffle",
    "IndexSelectFullImplementation",
    "IndexSelectHalfImplementation",
    "indexselect_full_implementation_forward",
    "indexselect_half_implementation_forward",
]


def indexselect_full_implementation_forward(x1, x2, fp_index):
    """``cat([x1, x2], 1)`` with its channels reordered by ``fp_index``."""
    return torch.cat([x1, x2], dim=1).index_select(1, fp_index)


def indexselect_half_implementation_forward(x1, x2, fp_index1, fp_index2):
    """The shuffled ``cat([x1, x2], 1)`` as two tensors: channels ``fp_index1`` and ``fp_index2``."""
    x = torch.cat([x1, x2], dim=1)
    return x.index_select(1, fp_index1), x.index_select(1, fp_index2)


class IndexSelectFullImplementation(torch.autograd.Function):
    """Forward: the shuffled concatenation. Backward: ``bp_index1``/``bp_index2`` give, for each
    channel of ``x1``/``x2``, its position in the output."""

    @staticmethod
    def forward(ctx, x1, x2, fp_index, bp_index1, bp_index2):
        ctx.save_for_backward(bp_index1, bp_index2)
        return indexselect_full_implementation_forward(x1, x2, fp_index)

    @staticmethod
    def backward(ctx, grad_output):
        bp_index1, bp_index2 = ctx.saved_tensors
        return grad_output.index_select(1, bp_index1), grad_output.index_select(1, bp_index2), None, None, None


class IndexSelectHalfImplementation(torch.autograd.Function):
    """Forward: the shuffled concatenation split in two. Backward: the two gradients joined,
    then picked back per input as in ``IndexSelectFullImplementation``."""

    @staticmethod
    def forward(ctx, x1, x2, fp_index1, fp_index2, bp_index1, bp_index2):
        ctx.save_for_backward(bp_index1, bp_index2)
        return indexselect_half_implementation_forward(x1, x2, fp_index1, fp_index2)

    @staticmethod
    def backward(ctx, grad_output1, grad_output2):
        bp_index1, bp_index2 = ctx.saved_tensors
        grad_output = torch.cat([grad_output1, grad_output2], 1)
        return (grad_output.index_select(1, bp_index1), grad_output.index_select(1, bp_index2),
                None, None, None, None)


class ChannelShuffle(nn.Module):
    """Shuffle the channels of ``cat([x1, x2], 1)`` over ``groups`` groups.

    Args:
        in_channels: channels of the concatenation (``x1`` and ``x2`` have half each).
        groups: number of shuffle groups; must divide ``in_channels``. Default 2.
        split_shuffle: return the result split into two halves (as ShuffleNetV2's next block
            takes it) instead of one tensor. Default True.
    """

    def __init__(self, in_channels, groups=2, split_shuffle=True):
        super().__init__()
        if in_channels <= 0 or groups <= 0 or in_channels % groups or in_channels % 2:
            raise ValueError(f"ChannelShuffle: in_channels={in_channels} must be even, positive and a multiple "
                             f"of groups={groups}")
        self.in_channels = in_channels
        self.groups = groups
        self.split_shuffle = split_shuffle
        self.group_len = in_channels // groups
        # Output channel i reads input channel out_channels[i].
        self.out_channels = torch.arange(in_channels).reshape(groups, self.group_len).t().flatten()
        position = torch.empty_like(self.out_channels)
        position[self.out_channels] = torch.arange(in_channels)
        half = in_channels // 2
        if split_shuffle:
            self.fp_index1 = self.out_channels[:half]
            self.fp_index2 = self.out_channels[half:]
        else:
            self.fp_index = self.out_channels
        self.bp_index1 = position[:half]
        self.bp_index2 = position[half:]
        self.checked = False

    def check_self(self, x):
        """Move the index tensors to ``x``'s device (once; again if the input moves)."""
        if self.bp_index1.device == x.device:
            self.checked = True
            return
        names = ("fp_index1", "fp_index2") if self.split_shuffle else ("fp_index",)
        for name in names + ("bp_index1", "bp_index2"):
            setattr(self, name, getattr(self, name).to(x.device))
        self.checked = True

    def forward(self, x1, x2):
        half = self.in_channels // 2
        for name, x in (("x1", x1), ("x2", x2)):
            if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.shape[1] != half:
                shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
                raise ValueError(f"ChannelShuffle: {name} must be a Tensor with in_channels / 2 = {half} channels "
                                 f"(dim 1), got {shape}")
        if not self.checked or self.bp_index1.device != x1.device:
            self.check_self(x1)
        if self.split_shuffle:
            if self.training:
                return IndexSelectHalfImplementation.apply(x1, x2, self.fp_index1, self.fp_index2,
                                                           self.bp_index1, self.bp_index2)
            return indexselect_half_implementation_forward(x1, x2, self.fp_index1, self.fp_index2)
        if self.training:
            return IndexSelectFullImplementation.apply(x1, x2, self.fp_index, self.bp_index1, self.bp_index2)
        return indexselect_full_implementation_forward(x1, x2, self.fp_index)
