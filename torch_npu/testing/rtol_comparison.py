"""The tolerance rule of Ascend's ``assertRtolEqual``, apart from the TestCase.

An npu result passes against its cpu reference when, per element, the absolute error
or the error relative to the larger magnitude is within ``prec`` (``prec16`` for
float16), with a tolerance on how many elements may miss: the comparison fails only
when more than ``prec`` of all elements miss the absolute bound *and* more than
``prec`` miss the relative bound. NaNs must sit at the same places and infinities
must be equal. With the default ``prec=1e-4`` any wrong element of a tensor below
10000 elements fails.
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

# Relative errors divide by max(|x|, |y|) + this, so exact zeros do not divide by zero.
_MAGNITUDE_FLOOR = {np.float16: 6e-8}
_DEFAULT_MAGNITUDE_FLOOR = 1e-9

_COMPARED_DTYPES = (
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64,
    np.float16, np.float32, np.float64,
)


def to_numpy(value: Any, auto_trans_dtype: bool = False, like: Any = None) -> np.ndarray:
    """A host ndarray of a tensor (any device, autograd detached), number or array.

    bfloat16 has no numpy dtype: it is compared as float32. Complex tensors are compared
    as their (real, imag) pairs.
    """
    if isinstance(value, torch.Tensor):
        tensor = value.detach()
        if auto_trans_dtype and isinstance(like, torch.Tensor):
            tensor = tensor.to(like.dtype)
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.float()
        if tensor.is_complex():
            tensor = torch.view_as_real(tensor.resolve_conj())
        return tensor.cpu().numpy()
    if isinstance(value, numbers.Number):
        return np.asarray(value)
    if isinstance(value, np.ndarray | np.generic):
        array = np.asarray(value)
        if auto_trans_dtype and isinstance(like, np.ndarray):
            array = array.astype(like.dtype)
        return array
    raise TypeError(
        f"assertRtolEqual compares tensors, numpy arrays and numbers, got {type(value).__name__}"
    )


def rtol_mismatch(x: np.ndarray, y: np.ndarray, prec: float, prec16: float) -> str | None:
    """Why ``x`` and ``y`` differ beyond the rule (None when they agree)."""
    if x.shape != y.shape:
        return f"shape error: {x.shape} vs {y.shape}"
    if x.dtype != y.dtype:
        return f"dtype error: {x.dtype} vs {y.dtype}"
    if x.dtype.type not in _COMPARED_DTYPES:
        names = ", ".join(np.dtype(d).name for d in _COMPARED_DTYPES)
        return f"dtype {x.dtype} is not compared; supported: {names}"
    if x.size == 0:
        return None
    if x.dtype == np.bool_:
        wrong = int(np.count_nonzero(x != y))
        return None if wrong == 0 else f"{wrong} of {x.size} booleans differ"
    tolerance = prec16 if x.dtype == np.float16 else prec
    floor = _MAGNITUDE_FLOOR.get(x.dtype.type, _DEFAULT_MAGNITUDE_FLOOR)
    a = x.astype(np.float64)
    b = y.astype(np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if not np.array_equal(nan_a, nan_b):
        return f"NaNs differ: {int(nan_a.sum())} vs {int(nan_b.sum())}, at different places"
    inf_a, inf_b = np.isinf(a), np.isinf(b)
    if not np.array_equal(a[inf_a | inf_b], b[inf_a | inf_b]):
        return "infinities differ"
    finite = ~(nan_a | inf_a | inf_b)
    error = np.abs(a[finite] - b[finite])
    magnitude = np.maximum(np.abs(a[finite]), np.abs(b[finite]))
    miss_absolute = int(np.count_nonzero(error > tolerance))
    miss_relative = int(np.count_nonzero(error / (magnitude + floor) > tolerance))
    allowed = x.size * tolerance
    if miss_absolute > allowed and miss_relative > allowed:
        worst = int(np.argmax(error))
        return (
            f"result error: {min(miss_absolute, miss_relative)} of {x.size} elements differ by more than "
            f"{tolerance} (absolute and relative); largest difference {error[worst]:.6g} "
            f"({float(a[finite][worst])!r} vs {float(b[finite][worst])!r})"
        )
    return None
