"""Float overflow on npu: whether the device keeps infs and NaNs, and checking a gradient.

Ascend cards compute either in saturation mode (an overflow clamps and raises a hidden
flag) or in INF/NAN mode (an overflow is an inf in the result, as IEEE arithmetic gives).
The simulator runs the cpu kernels, so its values always follow IEEE arithmetic: overflows
are visible in the values, and checking for them means looking for non-finite elements.
``is_support_inf_nan()`` answers the mode the environment chose, as an A2/A3 card does:
INF/NAN mode unless ``INF_NAN_MODE_FORCE_DISABLE=1`` forces saturation mode (results are
not clamped then: cpu's numbers are the promise; ``npu_check_overflow`` still finds the
overflow a saturating card would flag).
"""
from __future__ import annotations

import math
import numbers

import torch

from torch_npu import _public_env

__all__ = ["is_support_inf_nan", "npu_check_overflow"]


def is_support_inf_nan() -> bool:
    """Whether the card is in INF/NAN mode (overflows give inf/NaN) rather than saturation
    mode: True unless ``INF_NAN_MODE_FORCE_DISABLE=1``."""
    return _public_env.inf_nan_mode()


def npu_check_overflow(grad) -> bool:
    """Whether ``grad`` (a tensor, or a number) holds an inf or a NaN."""
    if isinstance(grad, torch.Tensor):
        if not (grad.is_floating_point() or grad.is_complex()):
            return False
        return not bool(torch.isfinite(grad).all())
    if isinstance(grad, numbers.Number) and not isinstance(grad, bool):
        value = complex(grad)
        return not (math.isfinite(value.real) and math.isfinite(value.imag))
    raise TypeError(f"npu_check_overflow expects a tensor or a number, got {type(grad).__name__}")
