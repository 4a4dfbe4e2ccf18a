"""``LabelSmoothingCrossEntropy``: cross entropy against a label-smoothed one-hot target,
through Ascend's fused ``npu_one_hot`` and ``npu_softmax_cross_entropy_with_logits``.

The smoothed target puts ``1 - smooth_factor`` on the true class and
``smooth_factor / (num_classes - 1)`` on every other class (so it sums to 1); the loss is the
float32 mean over the batch.
"""
import torch
from torch import nn

__all__ = ["LabelSmoothingCrossEntropy"]


class LabelSmoothingCrossEntropy(nn.Module):
    """Args: ``num_classes`` (>= 2), ``smooth_factor`` in [0, 1]. ``forward(pred (N, C) logits,
    target (N,) class indices)`` returns the scalar float32 loss."""

    def __init__(self, num_classes=1000, smooth_factor=0.0):
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"LabelSmoothingCrossEntropy: num_classes={num_classes} must be at least 2")
        if not 0.0 <= smooth_factor <= 1.0:
            raise ValueError(f"LabelSmoothingCrossEntropy: smooth_factor={smooth_factor} must be in [0, 1]")
        self.num_classes = num_classes
        self.on_value = 1.0 - smooth_factor
        self.off_value = 1.0 * smooth_factor / (num_classes - 1)

    def forward(self, pred, target):
        import torch_npu

        if pred.dim() != 2 or target.dim() != 1 or target.shape[0] != pred.shape[0]:
            raise ValueError("LabelSmoothingCrossEntropy: pred must be (N, C) logits and target (N,) class indices, "
                             f"got {tuple(pred.shape)} and {tuple(target.shape)}")
        one_hot = torch_npu.npu_one_hot(target.int(), -1, pred.size(1), self.on_value, self.off_value)
        loss = torch_npu.npu_softmax_cross_entropy_with_logits(pred, one_hot.to(pred.dtype))
        return torch.mean(loss, [0], keepdim=False, dtype=torch.float32)
