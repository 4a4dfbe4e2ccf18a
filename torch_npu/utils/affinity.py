"""Binding the calling thread to CPU cores (Ascend's ``set_thread_affinity``/``reset_thread_affinity``).

On Ascend, torch_npu binds its threads to the cores near the card; user code narrows the
calling thread before starting helper threads (which inherit the mask) and then resets
it. Both act on the calling thread only, through ``os.sched_setaffinity`` of its native
thread id. "Reset" means: back to the cores the main thread is allowed to run on.
"""
from __future__ import annotations

import os
import threading

__all__ = ["set_thread_affinity", "reset_thread_affinity"]


# The cores the process started with: what "no particular range" binds a thread to.
_PROCESS_CORES = frozenset(os.sched_getaffinity(threading.main_thread().native_id))


def _cores_of(core_range) -> set[int]:
    if (isinstance(core_range, list) and len(core_range) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in core_range)):
        ranges = [core_range]
    elif (isinstance(core_range, list) and core_range
          and all(isinstance(r, list) and len(r) == 2 for r in core_range)):
        ranges = core_range
    else:
        raise ValueError(f"Invalid core range: {core_range!r}; pass [start, end] or [[start, end], ...] "
                         "with 0 <= start <= end")
    cores: set[int] = set()
    for start, end in ranges:
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
            raise ValueError(f"Invalid core range: {core_range!r}; each range must be [start, end] "
                             "with 0 <= start <= end")
        cores.update(range(start, end + 1))
    return cores


def set_thread_affinity(core_range: list[int] | list[list[int]] | None = None):
    """Binds the calling thread to cores ``start..end`` (inclusive; several ranges allowed).

    ``None`` binds it to the cores the process started with.
    """
    cores = set(_PROCESS_CORES) if core_range is None else _cores_of(core_range)
    try:
        os.sched_setaffinity(threading.get_native_id(), cores)
    except OSError as exc:
        raise ValueError(f"set_thread_affinity: cannot bind to cores {sorted(cores)}: {exc.strerror}; "
                         f"this process may use cores {sorted(_PROCESS_CORES)}") from None


def reset_thread_affinity():
    """Gives the calling thread the cores of the main thread again."""
    os.sched_setaffinity(threading.get_native_id(), os.sched_getaffinity(threading.main_thread().native_id))
