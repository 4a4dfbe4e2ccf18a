"""``torch_npu.erase_stream``: Ascend's way to drop a ``record_stream`` mark from a tensor's
memory, so that the caching allocator may reuse it as soon as the tensor is freed.

On Ascend a recorded stream delays reuse until the stream's work is seen finished. On the
simulated npu every stream's work has finished by the time the host frees a tensor, so the
allocator never delays reuse for a recorded stream (``csrc/runtime/allocator.cpp``): there is no
delay to remove, and erasing is the validation of the call alone. The result Ascend's example
shows, the freed block handed out again at once, holds here with or without the call.
"""
from __future__ import annotations

import torch

__all__ = ["erase_stream"]


def erase_stream(tensor, stream):
    """Remove ``stream``'s use mark from ``tensor``'s memory (see the module docstring)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"erase_stream: tensor must be a Tensor, got {type(tensor).__name__}")
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"erase_stream: stream must be a torch.npu.Stream, got {type(stream).__name__}")
    if tensor.device.type != "npu" or stream.device != tensor.device:
        raise ValueError(
            f"erase_stream: the tensor is on {tensor.device} but the stream belongs to "
            f"{stream.device}; both must be the same npu device"
        )
    return None
