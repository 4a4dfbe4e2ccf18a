"""What a client library touched of torch_npu: the ``npu::`` operators it dispatched and,
when ``TORCH_NPU_CLIENT_CENSUS=1``, the torch_npu Python functions it called.

Operators are seen by a dispatch mode (cheap, always on). Python calls are seen by a
profile hook that records a call whose callee lives in the torch_npu package and whose
caller does not (so torch_npu's own internals are not listed); it slows everything down,
so only the full client script turns it on. ``torch.npu`` is torch_npu's device module:
calls through it are listed under their torch_npu module.
"""
from __future__ import annotations

import os
import sys
import threading
from collections import Counter
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_npu

_PACKAGE_DIR = os.path.dirname(os.path.abspath(torch_npu.__file__)) + os.sep


class _NpuOps(TorchDispatchMode):
    def __init__(self, seen: Counter):
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "npu":
            self.seen[func.name()] += 1
        return func(*args, **(kwargs or {}))


# Imports of our modules and our import hooks answering them are not calls of the client.
_IMPORT_MACHINERY = ("<module>", "find_spec", "create_module", "exec_module")


def _inside(filename: str) -> bool:
    return filename.startswith(_PACKAGE_DIR)


@contextmanager
def census():
    """Yields a dict filled, on exit, with ``ops`` and (when enabled) ``calls``."""
    ops, calls = Counter(), Counter()
    trace_calls = os.environ.get("TORCH_NPU_CLIENT_CENSUS") == "1"

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            caller = frame.f_back
            if (_inside(code.co_filename) and caller is not None and not _inside(caller.f_code.co_filename)
                    and code.co_name not in _IMPORT_MACHINERY):
                module = frame.f_globals.get("__name__", "?")
                calls[f"{module}.{code.co_qualname}"] += 1
        elif event == "c_call":
            module = getattr(arg, "__module__", None) or ""
            if module.startswith("torch_npu") and not _inside(frame.f_code.co_filename):
                calls[f"{module}.{getattr(arg, '__qualname__', arg)}"] += 1

    out: dict = {}
    if trace_calls:
        sys.setprofile(profile)
        threading.setprofile(profile)
    try:
        with _NpuOps(ops):
            yield out
    finally:
        if trace_calls:
            sys.setprofile(None)
            threading.setprofile(None)
        out["ops"] = dict(sorted(ops.items()))
        if trace_calls:
            out["calls"] = dict(sorted(calls.items()))
