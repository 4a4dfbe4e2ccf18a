"""Stream and event classes of the Ascend package beyond ``Stream``/``Event``.

``SyncLaunchStream`` is a stream whose launches complete before the call returns; every
npu stream behaves so on the simulator, so it is a plain ``torch.npu.Stream``.
``ExternalStream``/``ExternalEvent`` wrap an ``aclrtStream``/``aclrtEvent`` made by
other code through the Ascend runtime; there is no such runtime here to make one, so
they raise.
"""
from __future__ import annotations

from typing import Any

from .streams import Stream

__all__ = ["SyncLaunchStream", "ExternalStream", "ExternalEvent"]


class SyncLaunchStream(Stream):
    """A stream whose kernel launches are synchronous (all launches are, on the simulator)."""

    def __repr__(self) -> str:
        return f"<torch.npu.SyncLaunchStream device={self.device} stream_id={self.stream_id}>"


def _no_external(name: str) -> RuntimeError:
    return RuntimeError(
        f"torch.npu.{name} wraps a handle made by the Ascend runtime (aclrtStream/aclrtEvent), "
        "which does not exist on the simulated NPU. Create torch.npu.Stream() / torch.npu.Event() instead."
    )


class ExternalStream(Stream):
    """An ``aclrtStream`` made elsewhere; raises on the simulator."""

    def __new__(cls, stream_ptr: int, device: Any = None, **kwargs: Any) -> "ExternalStream":
        raise _no_external("ExternalStream")


class ExternalEvent:
    """An ``aclrtEvent`` made elsewhere; raises on the simulator."""

    def __init__(self, event_ptr: int, *args: Any, **kwargs: Any) -> None:
        raise _no_external("ExternalEvent")
