"""Deterministic-algorithm switches of the Ascend package, over PyTorch's own.

``set_deterministic_level(level)`` turns ``torch.use_deterministic_algorithms`` on
(level 1: warn on a nondeterministic operator; level 2: raise) or off (0).
``enable_deterministic_with_backward(x)`` / ``disable_deterministic_with_backward(x)``
switch it where ``x`` flows, in the forward pass and again when the backward pass
reaches that point, so a region of a model is deterministic in both directions.
"""
from __future__ import annotations

import torch

__all__ = ["set_deterministic_level", "enable_deterministic_with_backward", "disable_deterministic_with_backward"]


def set_deterministic_level(level: int) -> None:
    """0: off; 1: deterministic algorithms, warning on an operator without one; 2: raising."""
    if level not in (0, 1, 2) or isinstance(level, bool):
        raise ValueError(f"deterministic level must be 0, 1 or 2, got {level!r}")
    torch.use_deterministic_algorithms(level > 0, warn_only=level == 1)


class _DeterministicSwitch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor: torch.Tensor, enabled: bool) -> torch.Tensor:  # type: ignore[override]
        ctx.enabled = enabled
        torch.use_deterministic_algorithms(enabled)
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        torch.use_deterministic_algorithms(ctx.enabled)
        return grad, None


def enable_deterministic_with_backward(tensor: torch.Tensor) -> torch.Tensor:
    """Turn deterministic algorithms on here, forward and backward; returns ``tensor``."""
    return _DeterministicSwitch.apply(tensor, True)


def disable_deterministic_with_backward(tensor: torch.Tensor) -> torch.Tensor:
    """Turn deterministic algorithms off here, forward and backward; returns ``tensor``."""
    return _DeterministicSwitch.apply(tensor, False)
