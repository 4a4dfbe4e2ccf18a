"""``torch.npu.mstx``: Ascend's marker API for profiles, over ``torch.profiler``'s ranges.

``mstx.mark(message)`` puts an instant marker in the profile; ``mstx.range_start(message)``
opens a named range and returns its id, ``mstx.range_end(id)`` closes it (ranges may
overlap and cross threads); ``mstx.range_push``/``range_pop`` nest ranges per thread and
domain and return the nesting depth, as NVTX does; ``@mstx.mstx_range(message)`` wraps a
function in a range and ``mstx.annotate(message)`` is a range as a context manager or a
decorator. They appear in ``torch.profiler`` traces as ``record_function`` ranges named
``mstx::<message>`` (markers ``mstx::mark::<message>``); ``domain`` names a group of
ranges (kept per domain; the default domain is ``"default"``).
"""
from __future__ import annotations

import functools
import itertools
import threading
from typing import Any, Callable

import torch

__all__ = ["mstx"]


def _enter(name: str) -> Any:
    return torch.ops.profiler._record_function_enter_new(name, None)


def _exit(handle: Any) -> None:
    torch.ops.profiler._record_function_exit._RecordFunction(handle)


def _check_message(message: Any) -> str:
    if not isinstance(message, str):
        raise TypeError(f"mstx message must be a str, got {type(message).__name__}")
    return message


class _PushedRanges(threading.local):
    def __init__(self) -> None:
        self.by_domain: dict[str, list[Any]] = {}


class mstx:  # noqa: N801  (the Ascend name)
    """Profile markers and ranges (static methods, as in Ascend's ``torch_npu.npu.mstx``)."""

    _ids = itertools.count(1)
    _open: dict[int, Any] = {}
    _lock = threading.Lock()
    _pushed = _PushedRanges()

    @staticmethod
    def mark(message: str, stream=None, domain: str = "default") -> None:
        """An instant marker named ``message``."""
        _exit(_enter(f"mstx::mark::{_check_message(message)}"))

    @staticmethod
    def range_start(message: str, stream=None, domain: str = "default") -> int:
        """Open a range named ``message``; returns the id ``range_end`` takes."""
        handle = _enter(f"mstx::{_check_message(message)}")
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
        _exit(handle)

    @staticmethod
    def range_push(message: str, stream=None, domain: str = "default") -> int:
        """Open a range nested in this thread's open ranges of ``domain``; returns its
        depth (0 for the outermost)."""
        stack = mstx._pushed.by_domain.setdefault(domain, [])
        stack.append(_enter(f"mstx::{_check_message(message)}"))
        return len(stack) - 1

    @staticmethod
    def range_pop(domain: str = "default") -> int:
        """Close this thread's innermost range of ``domain``; returns the depth it had, or
        -1 when no range is open (as NVTX does)."""
        stack = mstx._pushed.by_domain.get(domain)
        if not stack:
            return -1
        _exit(stack.pop())
        return len(stack)

    @staticmethod
    def mstx_range(message: str, stream=None, domain: str = "default") -> Callable:
        """Decorator: run the function inside a range named ``message``."""
        _check_message(message)

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

    class annotate:  # noqa: N801
        """A range named ``message`` around a ``with`` block or each call of a decorated
        function (the function's name when ``message`` is empty)."""

        def __init__(self, message: str = "", stream=None, domain: str = "default") -> None:
            self.message = _check_message(message)
            self.stream = stream
            self.domain = domain
            self._ids: list[int] = []

        def __enter__(self) -> "mstx.annotate":
            self._ids.append(mstx.range_start(self.message, self.stream, self.domain))
            return self

        def __exit__(self, *exc: Any) -> bool:
            mstx.range_end(self._ids.pop(), self.domain)
            return False

        def __call__(self, fn: Callable) -> Callable:
            message = self.message or getattr(fn, "__qualname__", "function")

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with mstx.annotate(message, self.stream, self.domain):
                    return fn(*args, **kwargs)

            return wrapper
