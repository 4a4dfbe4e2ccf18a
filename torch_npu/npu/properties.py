"""Static description of each npu device as a plain, immutable Python value.

Compilers read these (Inductor's reduction heuristics use ``multi_processor_count``);
a frozen dataclass is something Dynamo can treat as a constant, unlike an object that
calls into the runtime on attribute access.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch_npu._C as _C

from ._utils import _get_device_index

__all__ = [
    "NpuDeviceProperties",
    "get_device_properties",
    "get_device_name",
    "get_device_capability",
]


@dataclasses.dataclass(frozen=True)
class NpuDeviceProperties:
    """What one npu device is: name, memory, core count, capability, cache size."""

    name: str
    total_memory: int
    multi_processor_count: int
    major: int
    minor: int
    l2_cache_size: int

    @property
    def capability(self) -> tuple[int, int]:
        return (self.major, self.minor)


# Properties describe hardware and do not change while the process runs, so each
# device is asked once.
_properties_by_index: dict[int, NpuDeviceProperties] = {}


def get_device_properties(device: Any = None) -> NpuDeviceProperties:
    """Properties of ``device`` (default: current device)."""
    index = _get_device_index(device, optional=True)
    props = _properties_by_index.get(index)
    if props is None:
        raw = _C._device_properties(index)
        fields = {f.name for f in dataclasses.fields(NpuDeviceProperties)}
        props = NpuDeviceProperties(**{k: v for k, v in raw.items() if k in fields})
        _properties_by_index[index] = props
    return props


def get_device_name(device: Any = None) -> str:
    """Name of ``device`` (default: current device)."""
    return get_device_properties(device).name


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """``(major, minor)`` capability of ``device`` (default: current device)."""
    return get_device_properties(device).capability
