"""Memory accounting of the npu caching allocator, in the shape of ``torch.cuda.memory``.

Each simulated device has its own allocator over host memory with a capacity; these
functions report and reset its statistics and release cached blocks.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch_npu._C as _C

from ._utils import _get_device_index

__all__ = [
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_memory_stats",
    "reset_max_memory_allocated",
    "empty_cache",
    "mem_get_info",
    "memory_stats",
]


def _raw_stats(device: Any) -> dict[str, int]:
    return _C._memory_stats(_get_device_index(device, optional=True))


def memory_stats(device: Any = None) -> "OrderedDict[str, int]":
    """Allocator statistics of ``device`` under ``torch.cuda.memory_stats`` key names."""
    raw = _raw_stats(device)
    stats = OrderedDict(
        [
            ("allocated_bytes.all.current", raw["allocated_bytes"]),
            ("allocated_bytes.all.peak", raw["peak_allocated_bytes"]),
            ("reserved_bytes.all.current", raw["reserved_bytes"]),
            ("reserved_bytes.all.peak", raw["peak_reserved_bytes"]),
            ("allocation.all.allocated", raw["alloc_count"]),
            ("allocation.all.freed", raw["free_count"]),
            ("allocation.all.current", raw["alloc_count"] - raw["free_count"]),
            ("num_ooms", raw["oom_count"]),
            ("capacity_bytes", raw["capacity_bytes"]),
        ]
    )
    return stats


def memory_allocated(device: Any = None) -> int:
    """Bytes currently occupied by tensors on ``device``."""
    return _raw_stats(device)["allocated_bytes"]


def max_memory_allocated(device: Any = None) -> int:
    """Peak of ``memory_allocated`` since start or the last ``reset_peak_memory_stats``."""
    return _raw_stats(device)["peak_allocated_bytes"]


def memory_reserved(device: Any = None) -> int:
    """Bytes held by the caching allocator on ``device`` (allocated plus cached)."""
    return _raw_stats(device)["reserved_bytes"]


def max_memory_reserved(device: Any = None) -> int:
    """Peak of ``memory_reserved`` since start or the last ``reset_peak_memory_stats``."""
    return _raw_stats(device)["peak_reserved_bytes"]


def reset_peak_memory_stats(device: Any = None) -> None:
    """Restart the peak counters of ``device`` from the current values."""
    _C._reset_peak_memory_stats(_get_device_index(device, optional=True))


def reset_max_memory_allocated(device: Any = None) -> None:
    """Same as ``reset_peak_memory_stats``, kept for ``torch.cuda`` parity."""
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Return every cached, unoccupied block of every device to the host."""
    _C._empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """``(free, total)`` bytes of ``device`` against its capacity."""
    return tuple(_C._mem_get_info(_get_device_index(device, optional=True)))
