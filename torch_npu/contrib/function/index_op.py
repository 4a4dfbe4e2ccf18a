"""``npu_fast_condition_index_put``: ``x[condition] = value`` written as a ``torch.where``,
the form Ascend's contrib API offers because a boolean ``index_put`` is slow on its device.

Unlike ``x[condition] = value`` it returns a new tensor and leaves ``x`` as it was. The
filled tensor is ``zeros_like(x)`` for 0, ``ones_like(x)`` for 1 and ``zeros_like(x) + value``
otherwise (as on Ascend), so a non-integral value promotes an integer ``x`` to float.
"""
from __future__ import annotations

import torch

__all__ = ["npu_fast_condition_index_put"]


def npu_fast_condition_index_put(x, condition, value):
    """``x`` with ``value`` where ``condition`` is True.

    Args:
        x (Tensor): the tensor to fill.
        condition (Tensor): bool, broadcastable to ``x``.
        value (int, float): the fill value.

    Returns:
        Tensor: a new tensor.
    """
    op = "npu_fast_condition_index_put"
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{op}: x must be a tensor, got {type(x).__name__}")
    if not isinstance(condition, torch.Tensor) or condition.dtype != torch.bool:
        got = condition.dtype if isinstance(condition, torch.Tensor) else type(condition).__name__
        raise TypeError(f"Expected condition.dtype in [torch.bool] ({op}: got {got}; pass e.g. x < 0.5)")
    if value == 0:
        filled = torch.zeros_like(x)
    elif value == 1:
        filled = torch.ones_like(x)
    else:
        filled = torch.zeros_like(x) + value
    return torch.where(condition, filled, x)
