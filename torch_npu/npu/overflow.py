"""Float overflow on npu: whether the device keeps infs and NaNs, and checking a gradient.

Ascend cards compute either in saturation mode (an overflow clamps and raises a hidden
flag) or in INF/NAN mode (an overflow is an inf in the result, as IEEE arithmetic gives).
The simulator runs the cpu kernels, so it is always in INF/NAN mode: overflows are
visible in the values, and checking for them means looking for non-finite elements.
"""
from __future__ import annotations

import math
import numbers

import torch

__all__ = ["is_support_inf_nan", "npu_check_overflow"]


def is_support_inf_nan() -> bool:
    """Whether overflows give inf/NaN values (INF/NAN mode): always, on the simulator."""
    return True


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
