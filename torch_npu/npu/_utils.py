"""How the ``npu`` device module turns a device argument into a validated index, and
what the current device and the device count are.

The file is named ``_utils`` because ``torch.serialization`` looks up
``torch.npu._utils._get_device_index`` to validate ``map_location`` for a PrivateUse1
device; everything in it is about device indices.
"""
from __future__ import annotations

from typing import Any

import torch

import torch_npu._C as _C

DEVICE_TYPE = "npu"

# The device count is fixed for the life of the process (the runtime reads
# TORCH_NPU_DEVICE_COUNT once, without initializing anything). Keeping it in a module
# global lets Dynamo read it as a guarded constant instead of calling the extension.
_DEVICE_COUNT: int = _C._device_count()


def _npu_is_current_accelerator() -> bool:
    accelerator = torch.accelerator.current_accelerator()
    return accelerator is not None and accelerator.type == DEVICE_TYPE


def _current_device_index() -> int:
    # Asked through torch.accelerator so Dynamo folds it (with a guard) instead of
    # breaking the graph on an opaque runtime call.
    if _npu_is_current_accelerator():
        return torch.accelerator.current_device_index()
    return _C._get_device()


def _check_index(index: int, given: Any) -> int:
    count = _DEVICE_COUNT
    if not 0 <= index < count:
        raise RuntimeError(
            f"Invalid npu device index {index} (from {given!r}): this process has "
            f"{count} npu device(s), valid indices are 0..{count - 1} "
            "(the count comes from TORCH_NPU_DEVICE_COUNT and ASCEND_RT_VISIBLE_DEVICES)"
        )
    return index


def _get_device_index(device: Any = None, optional: bool = False, allow_cpu: bool = False) -> int:
    """Return the npu device index named by ``device``.

    ``device`` may be an ``int``, a ``str`` such as ``"npu:1"``, a ``torch.device`` or
    ``None``. Without an index (``None`` or ``"npu"``) the current device is returned
    when ``optional`` is true; otherwise that is an error. With ``allow_cpu`` a cpu
    device maps to ``-1``, as in ``torch.cuda._utils``. Any index outside
    ``0..device_count()-1`` raises ``RuntimeError``.
    """
    given = device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type == "cpu" and allow_cpu:
            return -1
        # The real package's wording ("a npu"), which scripts and tests match on.
        if device.type != DEVICE_TYPE:
            if allow_cpu:
                raise ValueError(f"Expected a npu or cpu device, but got: {device}")
            raise ValueError(f"Expected a npu device, but got: {device}")
        index = device.index
    elif isinstance(device, bool):
        raise TypeError(f"Expected a npu device or an int index, but got: {given!r}")
    elif isinstance(device, int):
        index = device
    elif device is None:
        index = None
    else:
        raise TypeError(
            f"Expected a npu device (torch.device, str or int), but got {type(given).__name__}: {given!r}"
        )
    if index is None:
        if not optional:
            raise ValueError(
                f"Expected a torch.device with a specified index or an integer, but got: {given!r}"
            )
        return _current_device_index()
    return _check_index(index, given)
