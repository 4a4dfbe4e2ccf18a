"""Small JSON notes kept beside an FX-graph-cache entry, for what Inductor's cache does not keep.

npu's post-grad pass learns things about a graph (its outputs' user stacks, what blocks
its capture) that the reduce-overhead policy needs when it wraps the compiled graph. A
graph loaded from the FX-graph cache runs no pass, so the notes are kept by the graph's
FX-graph-cache key: in this process, and in a file of the Inductor cache directory next to
the cached graph, so a later process's cache hit finds them too.
"""
from __future__ import annotations

import json
import os
from typing import Any

_memory: dict[tuple[str, str], Any] = {}


def _path(kind: str, cache_key: str) -> str | None:
    if not cache_key.isalnum():
        return None
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return os.path.join(cache_dir(), f"npu_graph_{kind}", cache_key + ".json")


def remember(kind: str, cache_key: str | None, note: Any) -> None:
    """Keep ``note`` (JSON-able) of ``kind`` for later loads of the graph with this cache key."""
    if not cache_key:
        return
    _memory[(kind, cache_key)] = note
    path = _path(kind, cache_key)
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(note, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs the notes of later cache hits


def recall(kind: str, cache_key: str | None) -> Any:
    """The note of ``kind`` kept for this cache key, or None."""
    if not cache_key:
        return None
    if (kind, cache_key) in _memory:
        return _memory[(kind, cache_key)]
    path = _path(kind, cache_key)
    try:
        with open(path) as f:  # type: ignore[arg-type]
            note = json.load(f)
    except (OSError, TypeError, ValueError):
        return None
    _memory[(kind, cache_key)] = note
    return note


def forget_in_memory() -> None:
    """Drop the in-process copies (the files stay), as a new process starts."""
    _memory.clear()
