"""``torch.npu.mstx``: Ascend's marker API for profiles, over ``torch.profiler``'s ranges.

``mstx.mark(message)`` puts an instant marker in the profile, ``mstx.range_start(message)``
opens a named range and returns its id, ``mstx.range_end(id)`` closes it, and
``@mstx.mstx_range(message)`` wraps a function in one. They appear in
``torch.profiler`` traces as ``record_function`` ranges.
"""
from __future__ import annotations

import functools
import itertools
import threading
from typing import Any, Callable

import torch

__all__ = ["mstx"]


class mstx:  # noqa: N801  (the Ascend name)
    """Profile markers and ranges (static methods, as in Ascend's ``torch_npu.npu.mstx``)."""

    _ids = itertools.count(1)
    _open: dict[int, Any] = {}
    _lock = threading.Lock()

    @staticmethod
    def mark(message: str = "", stream: Any = None, domain: str = "default") -> None:
        """An instant marker named ``message``."""
        handle = torch.ops.profiler._record_function_enter_new(f"mstx::mark::{message}", None)
        torch.ops.profiler._record_function_exit._RecordFunction(handle)

    @staticmethod
    def range_start(message: str = "", stream: Any = None, domain: str = "default") -> int:
        """Open a range named ``message``; returns the id ``range_end`` takes."""
        handle = torch.ops.profiler._record_function_enter_new(f"mstx::{message}", None)
        with mstx._lock:
            range_id = next(mstx._ids)
            mstx._open[range_id] = handle
        return range_id

    @staticmethod
    def range_end(range_id: int, domain: str = "default") -> None:
        """Close the range ``range_id`` opened by ``range_start``."""
        with mstx._lock:
            handle = mstx._open.pop(range_id, None)
        if handle is None:
            raise ValueError(f"mstx.range_end: no open range with id {range_id}")
        torch.ops.profiler._record_function_exit._RecordFunction(handle)

    @staticmethod
    def mstx_range(message: str, stream: Any = None, domain: str = "default") -> Callable:
        """Decorator: run the function inside a range named ``message``."""

        def decorate(fn: Callable) -> Callable:
            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                range_id = mstx.range_start(message, stream, domain)
                try:
                    return fn(*args, **kwargs)
                finally:
                    mstx.range_end(range_id, domain)

            return wrapper

        return decorate
