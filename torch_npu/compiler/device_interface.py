"""Dynamo's view of the npu device: the ``DeviceInterface`` registered for ``"npu"``.

Dynamo and Inductor reach a device only through the interface registered for its type
(streams, events, device guards, properties; ``No interface for device npu`` otherwise).
Everything here forwards to the public ``torch.npu`` module, so the compiler layer works
over any runtime that registers ``npu`` through PrivateUse1. ``stream`` is the very
``torch.npu.stream`` object: Dynamo keys its stream-context handler on it.

Imported only by the setup steps, after ``torch._dynamo``; no method initializes the device.
"""
from __future__ import annotations

from typing import Any

import torch
from torch._dynamo.device_interface import (
    DeviceInterface,
    caching_worker_current_devices,
    caching_worker_device_properties,
)

DEVICE_TYPE = "npu"


def _device_index(device: Any) -> int | None:
    if device is None:
        return None
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != DEVICE_TYPE:
            raise ValueError(f"Expected a npu device, but got: {device}")
        return device.index
    return int(device)


def _exchange_device(index: int) -> int:
    """Make ``index`` current and return the previous index (-1: leave as is)."""
    if index < 0:
        return -1
    previous = torch.npu.current_device()
    if previous != index:
        torch.npu.set_device(index)
    return previous


class NpuInterface(DeviceInterface):
    device = torch.npu.device  # type: ignore[assignment]
    Event = torch.npu.Event  # type: ignore[assignment]
    Stream = torch.npu.Stream  # type: ignore[assignment]

    class Worker:  # type: ignore[override]
        """Device queries usable in compile workers, answered from values recorded here."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices[DEVICE_TYPE] = device

        @staticmethod
        def current_device() -> int:
            if DEVICE_TYPE in caching_worker_current_devices:
                return caching_worker_current_devices[DEVICE_TYPE]
            return torch.npu.current_device()

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            index = _device_index(device)
            if index is None:
                index = NpuInterface.Worker.current_device()
            if DEVICE_TYPE not in caching_worker_device_properties:
                caching_worker_device_properties[DEVICE_TYPE] = [
                    torch.npu.get_device_properties(i) for i in range(torch.npu.device_count())
                ]
            return caching_worker_device_properties[DEVICE_TYPE][index]

    current_device = staticmethod(torch.npu.current_device)
    set_device = staticmethod(torch.npu.set_device)
    device_count = staticmethod(torch.npu.device_count)
    stream = staticmethod(torch.npu.stream)  # type: ignore[assignment]
    current_stream = staticmethod(torch.npu.current_stream)
    set_stream = staticmethod(torch.npu.set_stream)  # type: ignore[assignment]
    synchronize = staticmethod(torch.npu.synchronize)
    get_device_properties = staticmethod(torch.npu.get_device_properties)  # type: ignore[assignment]
    exchange_device = staticmethod(_exchange_device)
    maybe_exchange_device = staticmethod(_exchange_device)

    @staticmethod
    def is_available() -> bool:
        return torch.npu.is_available()

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.npu.set_stream(
            torch.npu.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)
        )

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return torch.npu.current_stream(device_idx).stream_id

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return torch.npu.memory_allocated(device)

    @staticmethod
    def get_compute_capability(device: Any = None) -> str:
        # No compute-capability tiers on the npu; Inductor only compares it for Triton.
        return ""

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def is_triton_capable(device: Any = None) -> bool:
        return False


def register() -> None:
    """Register the interface for ``npu`` and each ``npu:<i>``, as Dynamo does for cuda."""
    from torch._dynamo.device_interface import register_interface_for_device

    register_interface_for_device(DEVICE_TYPE, NpuInterface)
    for index in range(torch.npu.device_count()):
        register_interface_for_device(f"{DEVICE_TYPE}:{index}", NpuInterface)
