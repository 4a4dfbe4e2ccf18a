"""Streams and events of the npu device, and the ``stream()`` context manager.

The runtime's device guard implements streams and events for ``torch.Stream`` and
``torch.Event``; the classes here subclass those so that everything PyTorch offers for
generic streams (``torch.accelerator``, Dynamo's stream tracing) also accepts ours, and
only add the ``torch.cuda``-style constructors and device checks.
"""
from __future__ import annotations

import os
import struct
import time
from typing import Any

import torch

import torch_npu._C as _C

from ._utils import DEVICE_TYPE, _get_device_index

__all__ = [
    "Stream",
    "Event",
    "StreamContext",
    "stream",
    "current_stream",
    "default_stream",
    "set_stream",
]


def _given_or_current_stream(stream: torch.Stream | None, what: str) -> torch.Stream:
    if stream is None:
        return current_stream()
    _check_npu_stream(stream, what)
    return stream


def _check_npu_stream(stream: Any, what: str) -> None:
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"{what} expects a torch.Stream, but got {type(stream).__name__}")
    if stream.device.type != DEVICE_TYPE:
        raise ValueError(f"{what} expects an npu stream, but got a stream of device {stream.device}")


class Stream(torch.Stream):
    """A queue of work on one npu device.

    ``Stream(device=None, priority=0)`` creates a new stream on ``device`` (default: the
    current device). Execution on the simulated device is synchronous on the host:
    streams order work and events carry timestamps.
    """

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> "Stream":
        if kwargs:
            # Wrapping an existing stream: Stream(stream_id=, device_index=, device_type=).
            return super().__new__(cls, priority=priority, **kwargs)
        index = _get_device_index(device, optional=True)
        return super().__new__(cls, device=torch.device(DEVICE_TYPE, index), priority=priority)

    def wait_event(self, event: torch.Event) -> None:
        """Make all future work on this stream wait for ``event``."""
        if not isinstance(event, torch.Event):
            raise TypeError(f"wait_event expects a torch.Event, but got {type(event).__name__}")
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        """Make all future work on this stream wait for the work queued on ``stream``."""
        _check_npu_stream(stream, "wait_stream")
        self.wait_event(stream.record_event())

    def record_event(self, event: torch.Event | None = None) -> "Event":
        """Record ``event`` (a new ``Event`` if ``None``) on this stream and return it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def query(self) -> bool:
        """Whether all work queued on this stream has completed."""
        return super().query()

    def synchronize(self) -> None:
        """Wait until all work queued on this stream has completed."""
        super().synchronize()

    def set_data_preprocess_stream(self, is_data_preprocess_stream=False) -> None:
        """Mark this stream as the one data preprocessing (host-to-device input copies)
        runs on. The card schedules such a stream apart; the simulator runs every stream
        on the host in order, so the mark is validated and remembered
        (``is_data_preprocess_stream`` attribute) and changes no result."""
        if not isinstance(is_data_preprocess_stream, bool):
            raise TypeError(
                f"is_data_preprocess_stream must be a bool, got {type(is_data_preprocess_stream).__name__}"
            )
        _data_preprocess_streams[(self.device_index, self.stream_id)] = is_data_preprocess_stream

    @property
    def is_data_preprocess_stream(self) -> bool:
        """What ``set_data_preprocess_stream`` set for this stream (False by default)."""
        return _data_preprocess_streams.get((self.device_index, self.stream_id), False)

    def __repr__(self) -> str:
        return f"<torch.npu.Stream device={self.device} stream_id={self.stream_id}>"


# Streams are re-wrapped on every current_stream() call, so the mark is kept by identity
# (device, stream id) rather than on one Python object.
_data_preprocess_streams: dict[tuple[int, int], bool] = {}


# Event.ipc_handle(): magic, sender pid, sender device index.
_IPC_EVENT_MAGIC = b"NPUEVENT"
_IPC_EVENT_HANDLE = struct.Struct("<8sqq")


class Event(torch.Event):
    """A marker in a stream, used to wait on and to time work.

    ``Event(enable_timing=False, blocking=False, interprocess=False)``; the event takes
    the device of the stream it is first recorded on.

    torch's own ``torch.Stream.record_event(e)`` and ``torch.Event.elapsed_time(e)``
    accept only an exact ``torch.Event`` as ``e``; with an npu event call the event's
    methods instead (``e.record(stream)``, ``e.elapsed_time(other)``), which accept both.
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> "Event":
        event = super().__new__(
            cls,
            device=DEVICE_TYPE,
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )
        event._timed = bool(enable_timing)
        event._interprocess = bool(interprocess)
        return event

    def record(self, stream: torch.Stream | None = None) -> None:
        """Record the event on ``stream`` (default: the current stream)."""
        super().record(_given_or_current_stream(stream, "Event.record"))
        if self._timed:
            # Work on the simulated device runs when it is queued, so the host clock at
            # record time is the time the device reaches the event.
            self._recorded_us = time.monotonic_ns() // 1000

    def query(self) -> bool:
        """Whether the work captured by this event has completed."""
        return super().query()

    def synchronize(self) -> None:
        """Wait until the work captured by this event has completed."""
        super().synchronize()

    def ipc_handle(self) -> bytes:
        """A handle another process can open this event by (``interprocess=True`` events).

        Work on the simulated device runs when it is queued, so whatever the event marks
        is finished once it is recorded: the handle carries the event's device and the
        sender's pid, and the event opened from it (``from_ipc_handle``) is complete.
        """
        if not getattr(self, "_interprocess", False):
            raise RuntimeError("Event.ipc_handle: the event must be created with interprocess=True")
        device = self.device.index if self.device is not None and self.device.index is not None else -1
        return _IPC_EVENT_HANDLE.pack(_IPC_EVENT_MAGIC, os.getpid(), device)

    @classmethod
    def from_ipc_handle(cls, device, handle) -> "Event":
        """The event of an ``ipc_handle`` made by another process, on ``device``: complete,
        since the work it marks finished when the sender queued it."""
        if not isinstance(handle, (bytes, bytearray)) or len(handle) != _IPC_EVENT_HANDLE.size:
            raise ValueError(
                f"Event.from_ipc_handle: handle must be the {_IPC_EVENT_HANDLE.size}-byte value of Event.ipc_handle(), "
                f"got {type(handle).__name__} of length {len(handle) if hasattr(handle, '__len__') else '?'}"
            )
        magic, _pid, _sender_device = _IPC_EVENT_HANDLE.unpack(bytes(handle))
        if magic != _IPC_EVENT_MAGIC:
            raise ValueError("Event.from_ipc_handle: handle is not an npu event handle (made by Event.ipc_handle())")
        event = cls(interprocess=True)
        event.record(current_stream(device))
        return event

    def recorded_time(self) -> int:
        """When the device reached this event, in microseconds of a monotonic clock (the
        event needs ``enable_timing=True`` and to have been recorded)."""
        if not self._timed:
            raise RuntimeError("recorded_time needs an event created with enable_timing=True")
        recorded = getattr(self, "_recorded_us", None)
        if recorded is None:
            raise RuntimeError("recorded_time: the event must be recorded before its time is asked")
        return recorded

    def wait(self, stream: torch.Stream | None = None) -> None:
        """Make ``stream`` (default: the current stream) wait for this event."""
        super().wait(_given_or_current_stream(stream, "Event.wait"))

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, with timing)."""
        if not isinstance(end_event, torch.Event):
            raise TypeError(f"elapsed_time expects a torch.Event, but got {type(end_event).__name__}")
        # torch.Event.elapsed_time accepts only an exact torch.Event as its argument, so a
        # pair of torch.npu.Event objects is timed by the runtime directly.
        if type(end_event) is not torch.Event:
            return _C._event_elapsed_time(self, end_event)
        return super().elapsed_time(end_event)

    def __repr__(self) -> str:
        return f"<torch.npu.Event device={self.device} event_id={self.event_id}>"


def _wrap(stream: torch.Stream) -> Stream:
    return Stream(stream_id=stream.stream_id, device_index=stream.device_index, device_type=stream.device_type)


def current_stream(device: Any = None) -> Stream:
    """The stream work is currently queued on for ``device`` (default: current device)."""
    index = _get_device_index(device, optional=True)
    return _wrap(torch.accelerator.current_stream(index))


def default_stream(device: Any = None) -> Stream:
    """The default stream (id 0) of ``device`` (default: current device)."""
    index = _get_device_index(device, optional=True)
    current = torch.accelerator.current_stream(index)
    return Stream(stream_id=0, device_index=index, device_type=current.device_type)


def set_stream(stream: torch.Stream | None) -> None:
    """Make ``stream`` the current stream of its device, and its device the current
    device (as ``torch.cuda.set_stream`` and ``torch.accelerator.set_stream`` do).
    ``None`` is a no-op."""
    if stream is None:
        return
    _check_npu_stream(stream, "set_stream")
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes ``stream_ctx`` current on its device; ``None`` is a no-op."""

    def __init__(self, stream_ctx: torch.Stream | None):
        if stream_ctx is not None:
            _check_npu_stream(stream_ctx, "torch.npu.stream")
        self.stream = stream_ctx
        self.src_prev_stream: torch.Stream | None = None
        self.dst_prev_stream: torch.Stream | None = None

    def __enter__(self) -> torch.Stream | None:
        target = self.stream
        if target is None:
            return None
        self.src_prev_stream = torch.accelerator.current_stream()
        # The stream may belong to another device: remember that device's current
        # stream too, so both are restored on exit.
        if self.src_prev_stream.device != target.device:
            self.dst_prev_stream = torch.accelerator.current_stream(target.device_index)
        set_stream(target)
        return target

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> bool:
        target = self.stream
        if target is None:
            return False
        if self.dst_prev_stream is not None:
            set_stream(self.dst_prev_stream)
        set_stream(self.src_prev_stream)
        self.src_prev_stream = self.dst_prev_stream = None
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    """``with torch.npu.stream(s):`` queues the enclosed work on ``s``; ``None`` is a no-op."""
    return StreamContext(stream)


# ``_launch_host_kernel(fn, *args)`` runs host function ``fn(*args)`` as a kernel on the
# current stream. Compiled code launches its kernels through it so that, while the
# current stream is capturing an NPU graph, the launch is recorded for replay instead
# of running now. Bound directly (no Python wrapper) because it sits on every launch.
_launch_host_kernel = _C._launch_host_kernel


_EXTERNAL_STREAM_NAMES = ("ExternalEvent", "ExternalStream", "SyncLaunchStream")


def __getattr__(name: str) -> Any:
    # The Ascend package also serves these classes from this module; they live in
    # external_streams, which imports this module (hence resolved on access).
    if name in _EXTERNAL_STREAM_NAMES:
        from . import external_streams

        return getattr(external_streams, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
