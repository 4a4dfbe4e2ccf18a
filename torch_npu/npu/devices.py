"""Device selection and lifetime for ``torch.npu``: availability, lazy init, the current
device, the ``device``/``device_of`` context managers and ``synchronize``.

``current_device``, ``is_available`` and ``synchronize`` are written over
``torch.accelerator`` so that Dynamo folds or traces them like its own functions
rather than breaking the graph on a call into the runtime extension.
"""
from __future__ import annotations

from typing import Any

import torch

import torch_npu._C as _C

from .lazy_calls import _run_queued_calls
from ._utils import _DEVICE_COUNT, _current_device_index, _get_device_index, _npu_is_current_accelerator

__all__ = [
    "is_available",
    "is_initialized",
    "init",
    "device_count",
    "current_device",
    "set_device",
    "device",
    "device_of",
    "synchronize",
    "can_device_access_peer",
]


def device_count() -> int:
    """Number of npu devices. Never initializes the device."""
    return _DEVICE_COUNT


def is_available() -> bool:
    """True when npu is the current accelerator and at least one device exists.

    ``torch.accelerator.is_available()`` delegates to this function, so it answers
    from ``torch.accelerator.current_accelerator()`` and the device count rather than
    calling back into ``torch.accelerator.is_available()``.
    """
    return _npu_is_current_accelerator() and device_count() > 0


def is_initialized() -> bool:
    """True once the runtime has initialized (first real use or ``init()``)."""
    return _C._is_initialized()


def init() -> None:
    """Initialize the runtime now. Idempotent; normally first use does it.

    In a process forked from one that had initialised npu this raises, telling to use
    the ``spawn`` start method, as ``torch.cuda.init()`` does.
    """
    _C._init()
    _run_queued_calls()


def _lazy_init() -> None:
    """Initialise the runtime, then run what ``_lazy_call`` queued. PyTorch calls this
    before it makes the first npu tensor."""
    _C._init()
    _run_queued_calls()


def _is_in_bad_fork() -> bool:
    """True in a process forked from one that had initialised npu, as for CUDA: such a
    child cannot use npu (``torch.manual_seed`` asks this before seeding npu)."""
    return _C._is_in_bad_fork()


def current_device() -> int:
    """Index of the current npu device."""
    return _current_device_index()


def set_device(device: Any) -> None:
    """Make ``device`` (int, ``"npu:i"`` or ``torch.device``) the current device.

    A negative index is a no-op, as for ``torch.cuda.set_device``.
    """
    if isinstance(device, int) and not isinstance(device, bool) and device < 0:
        return
    _C._set_device(_get_device_index(device))


def _exchange_device(index: int) -> int:
    if index < 0:
        return -1
    return _C._exchange_device(index)


# ``with _DeviceGuard(index): ...`` makes npu device ``index`` current for the body and
# restores the previous device after it (a negative index: no change), as
# ``torch.cuda._DeviceGuard``. Compiled npu code runs each graph's body under one, so it is
# a C type (no Python frame on entering or leaving).
_DeviceGuard = _C._DeviceGuard


class device:
    """Context manager that makes ``device`` current and restores the previous one.

    ``None`` or a negative index leaves the current device unchanged.
    """

    def __init__(self, device: Any):
        if device is None or (isinstance(device, int) and not isinstance(device, bool) and device < 0):
            self.idx = -1
        else:
            self.idx = _get_device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = _exchange_device(self.idx)

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> bool:
        if self.prev_idx >= 0 and self.prev_idx != self.idx:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of tensor ``obj`` current.

    A tensor that is not on npu leaves the current device unchanged.
    """

    def __init__(self, obj: torch.Tensor):
        index = obj.get_device() if obj.device.type == "npu" else -1
        super().__init__(index if index >= 0 else None)


def synchronize(device: Any = None) -> None:
    """Wait for all work queued on every stream of ``device`` (default: current)."""
    if _npu_is_current_accelerator():
        if device is None:
            torch.accelerator.synchronize()
            return
        index = _get_device_index(device, optional=True)
        torch.accelerator.synchronize(torch.device("npu", index))
    else:
        _C._synchronize(_get_device_index(device, optional=True))



def can_device_access_peer(device_id: Any, peer_device_id: Any) -> bool:
    """Whether ``device_id`` can read and write memory of ``peer_device_id`` directly. All
    simulated devices live in one host memory, so any two distinct devices can (a device
    is not its own peer, as with ``torch.cuda.can_device_access_peer``)."""
    index = _get_device_index(device_id, optional=True)
    peer = _get_device_index(peer_device_id)
    return index != peer
