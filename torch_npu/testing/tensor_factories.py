"""Paired cpu/npu input tensors, the way Ascend operator tests make them.

A test describes an input as ``[dtype, npu_format, shape]`` (``[np.float32, 0, (4, 3)]``)
and gets the same random values twice: a cpu tensor (the reference) and an npu copy
cast to that storage format (``-1`` keeps the default). Values come from numpy's global
generator, which ``TestCase.setUp`` seeds, so inputs repeat from run to run.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

import torch_npu

__all__ = ["create_common_tensor", "create_dtype_tensor"]

_NUMPY_OF_TORCH = {
    torch.bool: np.bool_, torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16,
    torch.int32: np.int32, torch.int64: np.int64, torch.float16: np.float16,
    torch.float32: np.float32, torch.float64: np.float64,
}


def _to_npu(cpu_input: torch.Tensor, npu_format: int, device: Any) -> torch.Tensor:
    npu_input = cpu_input.to(device if device is not None else "npu")
    if npu_format != -1:
        npu_input = torch_npu.npu_format_cast(npu_input, npu_format)
    return npu_input


def _check_range(min_value: Any, max_value: Any) -> None:
    if min_value > max_value:
        raise ValueError(f"the minimum {min_value} is greater than the maximum {max_value}")


def create_common_tensor(item, minValue, maxValue, device=None):  # noqa: N803  (Ascend's names)
    """``(cpu_tensor, npu_tensor)`` of ``item = [dtype, npu_format, shape]`` with values
    uniform in ``[minValue, maxValue)``.

    ``dtype`` is a numpy dtype (``np.float32``) or a torch dtype (``torch.bfloat16`` is
    drawn in float32 and rounded); integer dtypes truncate the uniform values, as a numpy
    ``astype`` does. ``npu_format`` is an ACL format id (``0`` NCHW, ``2`` ND, ``3`` NC1HWC0,
    ``29`` FRACTAL_NZ) or ``-1``.
    """
    if not isinstance(item, list | tuple) or len(item) < 3:
        raise ValueError(f"create_common_tensor: item must be [dtype, npu_format, shape], got {item!r}")
    dtype, npu_format, shape = item[0], item[1], item[2]
    _check_range(minValue, maxValue)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    torch_dtype = dtype if isinstance(dtype, torch.dtype) else None
    numpy_dtype = _NUMPY_OF_TORCH.get(torch_dtype, np.float32) if torch_dtype is not None else dtype
    values = np.random.uniform(minValue, maxValue, shape).astype(numpy_dtype)
    cpu_input = torch.from_numpy(values)
    if torch_dtype is not None and cpu_input.dtype != torch_dtype:
        cpu_input = cpu_input.to(torch_dtype)
    return cpu_input, _to_npu(cpu_input, npu_format, device)


def create_dtype_tensor(shape, dtype, npu_format=-1, min_value=-5, max_value=5, no_zero=False, device=None):
    """``(cpu_tensor, npu_tensor)`` of a torch ``dtype``: random booleans, integers in
    ``[min_value, max_value)`` or floats uniform in that range; ``no_zero`` turns every
    zero into one (inputs of divisions)."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"create_dtype_tensor: dtype must be a torch.dtype, got {dtype!r}")
    _check_range(min_value, max_value)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if dtype == torch.bool:
        cpu_input = torch.from_numpy(np.random.randint(0, 2, shape).astype(np.bool_))
    elif not (dtype.is_floating_point or dtype.is_complex):
        cpu_input = torch.from_numpy(np.random.randint(min_value, max_value, shape)).to(dtype)
    else:
        cpu_input = torch.from_numpy(np.random.uniform(min_value, max_value, shape)).to(dtype)
    if no_zero:
        cpu_input = torch.where(cpu_input == 0, torch.ones((), dtype=dtype), cpu_input)
    return cpu_input, _to_npu(cpu_input, npu_format, device)
