"""Profiling of work issued from threads other than the one that started the profiler.

torch.profiler records operators of the starting thread only, unless the session asks
Kineto for every thread (``profile_all_threads``). Ascend's
``profile.enable_profiler_in_child_thread`` asks for that; this module keeps the request, and
``torch_npu.profiler.profile`` reads it whenever a profiling cycle starts (so a request made
while a cycle runs applies from the next cycle on). One session serves every thread here,
so the child-thread options (record_shapes, ...) are added to the session's own.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["ChildThreadOptions", "enable", "disable", "current"]


@dataclass(frozen=True)
class ChildThreadOptions:
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False


_lock = threading.Lock()
_requested: ChildThreadOptions | None = None


def enable(options: ChildThreadOptions) -> None:
    global _requested
    with _lock:
        _requested = options


def disable() -> None:
    global _requested
    with _lock:
        _requested = None


def current() -> ChildThreadOptions | None:
    with _lock:
        return _requested
