"""Stream and event classes of the Ascend package beyond ``Stream``/``Event``.

``SyncLaunchStream`` is a stream whose launches complete before the call returns; every
npu stream behaves so on the simulator, so it is a plain ``torch.npu.Stream``.

``ExternalEvent`` is Ascend's event for ordering work across NPU graph boundaries:
``record(stream)`` marks the work queued so far on ``stream``, ``wait(stream)`` makes
``stream`` wait for it, ``reset(stream)`` clears the mark so the event can be recorded
again (waiting on a reset event does not wait). It is built on ``torch.npu.Event``.

``ExternalStream`` wraps an ``aclrtStream`` made by other code through the Ascend
runtime; there is no such runtime here to make one, so it raises.
"""
from __future__ import annotations

from typing import Any

import torch

from .streams import Event, Stream, _given_or_current_stream

__all__ = ["SyncLaunchStream", "ExternalStream", "ExternalEvent"]


class SyncLaunchStream(Stream):
    """A stream whose kernel launches are synchronous (all launches are, on the simulator)."""

    def __repr__(self) -> str:
        return f"<torch.npu.SyncLaunchStream device={self.device} stream_id={self.stream_id}>"


class ExternalStream(Stream):
    """An ``aclrtStream`` made elsewhere; raises on the simulator."""

    def __new__(cls, stream_ptr: int, device: Any = None, **kwargs: Any) -> "ExternalStream":
        raise RuntimeError(
            "torch.npu.ExternalStream wraps a handle made by the Ascend runtime (aclrtStream), which does "
            "not exist on the simulated NPU. Create torch.npu.Stream() instead."
        )


class ExternalEvent:
    """An event that orders work across graph boundaries: record, wait, reset."""

    def __init__(self) -> None:
        self._event: Event | None = None

    def record(self, stream=None) -> None:
        """Mark the work queued so far on ``stream`` (default: the current stream)."""
        stream = _given_or_current_stream(stream, "ExternalEvent.record")
        event = Event()
        event.record(stream)
        self._event = event

    def wait(self, stream=None) -> None:
        """Make ``stream`` (default: the current stream) wait for the recorded work; a no-op
        when the event is not recorded (or was reset)."""
        stream = _given_or_current_stream(stream, "ExternalEvent.wait")
        if self._event is not None:
            self._event.wait(stream)

    def reset(self, stream=None) -> None:
        """Clear the recorded mark (ordered after the work queued on ``stream``)."""
        _given_or_current_stream(stream, "ExternalEvent.reset")
        self._event = None

    def query(self) -> bool:
        """Whether the recorded work has completed (True when nothing is recorded)."""
        return True if self._event is None else self._event.query()

    def __repr__(self) -> str:
        state = "recorded" if self._event is not None else "not recorded"
        return f"<torch.npu.ExternalEvent {state}>"
