"""Updating tasks of a captured NPU graph: ``graph_task_group_begin/end`` and
``graph_task_update_begin/end``.

Ascend lets a captured graph's operators get new parameters without a new capture (say
the sequence lengths of an attention layer at each decoding step):

    with torch.npu.graph(g):
        torch.npu.graph_task_group_begin(s)
        attention_out(q, k, v, lengths, out=o)        # captured with the first lengths
        handle = torch.npu.graph_task_group_end(s)
    with torch.npu.stream(u):
        torch.npu.graph_task_update_begin(u, handle)
        attention_out(q, k, v, new_lengths, out=o)    # recorded, not run
        torch.npu.graph_task_update_end(u)
    g.replay()                                        # o computed with new_lengths

The card patches the group's tasks in place. The simulator's graph replays recorded
host kernels, which cannot be re-parameterised, so the group's end is recorded as one
more host kernel that replays the latest update of the group, itself captured as a small
graph on the update stream. Replaying ``g`` therefore runs the group as captured and then
its update, which writes the same outputs (``out=`` tensors, as Ascend requires of an
update): what follows in the graph reads the updated results, as on the card. The first
run of the group only costs time, unless its operators have side effects beyond their
outputs (then they happen with the old parameters too).
"""
from __future__ import annotations

import threading
from typing import Any

import torch

__all__ = [
    "graph_task_group_begin",
    "graph_task_group_end",
    "graph_task_update_begin",
    "graph_task_update_end",
]


class GraphTaskHandle:
    """A group of captured tasks (from ``graph_task_group_end``) and its latest update."""

    def __init__(self) -> None:
        self._update: Any = None  # the NPUGraph of the latest update, or None
        self._lock = threading.Lock()

    def _replay_update(self) -> None:
        # Runs as a host kernel inside the replay of the graph holding the group.
        with self._lock:
            update = self._update
        if update is not None:
            update.replay()

    def _set_update(self, update: Any) -> None:
        with self._lock:
            previous, self._update = self._update, update
        if previous is not None:
            previous.reset()

    def __repr__(self) -> str:
        return f"<torch.npu graph task group, {'updated' if self._update is not None else 'as captured'}>"


# stream key -> what is open on it: a group being captured, or an update being recorded.
_open_groups: dict[tuple[int, int], bool] = {}
_open_updates: dict[tuple[int, int], tuple[GraphTaskHandle, Any]] = {}
_state_lock = threading.Lock()


def _key_of_current(stream: Any, what: str) -> tuple[int, int]:
    if not isinstance(stream, torch.Stream) or stream.device.type != "npu":
        raise TypeError(f"{what} expects an npu stream, got {stream!r}")
    current = torch.npu.current_stream(stream.device_index)
    if current.stream_id != stream.stream_id:
        raise RuntimeError(f"{what}: {stream} must be the current stream (use `with torch.npu.stream(stream):`)")
    return (stream.device_index, stream.stream_id)


def graph_task_group_begin(stream) -> None:
    """Start a group of tasks, inside a graph capture on ``stream``."""
    key = _key_of_current(stream, "graph_task_group_begin")
    if not torch.npu.is_current_stream_capturing():
        raise RuntimeError("graph_task_group_begin: the stream is not capturing a graph (call it inside "
                           "torch.npu.graph(...) on the capture stream)")
    with _state_lock:
        if _open_groups.get(key):
            raise RuntimeError("graph_task_group_begin: a task group is already open on this stream")
        _open_groups[key] = True


def graph_task_group_end(stream) -> GraphTaskHandle:
    """End the group opened on ``stream``; returns the handle its updates take."""
    from .streams import _launch_host_kernel

    key = _key_of_current(stream, "graph_task_group_end")
    with _state_lock:
        if not _open_groups.pop(key, False):
            raise RuntimeError("graph_task_group_end: no task group is open on this stream")
    handle = GraphTaskHandle()
    _launch_host_kernel(handle._replay_update)  # recorded: runs the latest update at each replay
    return handle


def graph_task_update_begin(stream, handle) -> None:
    """Start recording new tasks for the group ``handle`` on ``stream`` (not capturing a
    graph); the work queued on it until ``graph_task_update_end`` is recorded, not run."""
    from .graphs import NPUGraph

    if not isinstance(handle, GraphTaskHandle):
        raise TypeError(f"graph_task_update_begin expects the handle of graph_task_group_end, got {handle!r}")
    key = _key_of_current(stream, "graph_task_update_begin")
    if torch.npu.is_current_stream_capturing():
        raise RuntimeError("graph_task_update_begin: the update stream is capturing a graph; update on another "
                           "stream, after the capture")
    with _state_lock:
        if key in _open_updates:
            raise RuntimeError("graph_task_update_begin: an update is already open on this stream")
        update = NPUGraph()
        _open_updates[key] = (handle, update)
    try:
        update.capture_begin()
    except BaseException:
        with _state_lock:
            _open_updates.pop(key, None)
        raise


def graph_task_update_end(stream) -> None:
    """End the update opened on ``stream``: the group's next replays run these tasks."""
    key = _key_of_current(stream, "graph_task_update_end")
    with _state_lock:
        opened = _open_updates.pop(key, None)
    if opened is None:
        raise RuntimeError("graph_task_update_end: no update is open on this stream")
    handle, update = opened
    update.capture_end()
    handle._set_update(update)
