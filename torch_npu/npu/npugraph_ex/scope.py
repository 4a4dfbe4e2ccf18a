"""Region settings of npugraph_ex: ``with scope.limit_core_num(...)``, ``with scope.deterministic(level)``.

On the card these annotate the operators of a region of the compiled graph. On the
simulator they set the same thing for the region eagerly and put it back after:
``limit_core_num`` the core limits of the region's stream (``torch.npu.set_stream_limit``,
reported by ``get_stream_limit``, not enforced), ``deterministic`` the deterministic
level (``torch.npu.set_deterministic_level``), so the region's operators run with it.
"""
from __future__ import annotations

import contextlib

import torch

__all__ = ["limit_core_num", "deterministic"]


@contextlib.contextmanager
def limit_core_num(op_aicore_num: int, op_vectorcore_num: int, stream=None):
    """Limit the cube (AI core) and vector cores of the region's operators on ``stream``
    (default: the current stream)."""
    from torch_npu.npu import ascend_options

    stream = stream if stream is not None else torch.npu.current_stream()
    key = ascend_options._stream_key(stream)
    previous = ascend_options._stream_limits.get(key)
    torch.npu.set_stream_limit(stream, op_aicore_num, op_vectorcore_num)
    try:
        yield
    finally:
        if previous is None:
            torch.npu.reset_stream_limit(stream)
        else:
            ascend_options._stream_limits[key] = previous


@contextlib.contextmanager
def deterministic(level: int):
    """Run the region at deterministic ``level`` (0 off, 1 warn, 2 raise), then restore."""
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.npu.set_deterministic_level(level)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
