"""Makes ``torch.cuda.nvtx`` ranges and marks npu profiler ranges (``torch.npu.mstx``).

Missing extension point: every function of ``torch.cuda.nvtx`` (``range_push``/``range_pop``,
``range_start``/``range_end``, ``mark``, the ``range`` context manager) calls the module's
``_nvtx`` binding object, which a build without CUDA replaces by a stub that raises "NVTX
functions not installed"; PyTorch has no registry for another marker API.

``apply()`` binds ``torch.cuda.nvtx._nvtx`` (one patch site) to ``NpuMarkers``, which gives
the binding's methods over ``torch.npu.mstx``: a range appears in a ``torch.profiler``
trace as the ``record_function`` range ``mstx::<message>``, a mark as ``mstx::mark::<message>``.
``rangePushA``/``rangePop`` keep NVTX's per-thread stack and return its zero-based depth
(``-1`` for a pop with nothing pushed, as NVTX does).

Delete when ``torch.cuda.nvtx`` dispatches to the current accelerator's marker API.
"""
from __future__ import annotations

import threading

import torch
import torch.cuda.nvtx as cuda_nvtx

_original = None


class NpuMarkers:
    """The methods of ``torch._C._nvtx`` that ``torch.cuda.nvtx`` calls, over ``torch.npu.mstx``."""

    def __init__(self) -> None:
        self._stacks = threading.local()

    def _stack(self) -> list[int]:
        stack = getattr(self._stacks, "ids", None)
        if stack is None:
            stack = self._stacks.ids = []
        return stack

    def rangePushA(self, message: str) -> int:  # noqa: N802  (the NVTX binding's names)
        stack = self._stack()
        stack.append(torch.npu.mstx.range_start(str(message)))
        return len(stack) - 1

    def rangePop(self) -> int:  # noqa: N802
        stack = self._stack()
        if not stack:
            return -1
        torch.npu.mstx.range_end(stack.pop())
        return len(stack)

    def rangeStartA(self, message: str) -> int:  # noqa: N802
        return torch.npu.mstx.range_start(str(message))

    def rangeEnd(self, range_id: int) -> None:  # noqa: N802
        torch.npu.mstx.range_end(range_id)

    def markA(self, message: str) -> None:  # noqa: N802
        torch.npu.mstx.mark(str(message))

    def deviceRangeStart(self, message: str, stream: int = 0) -> int:  # noqa: N802
        # The simulated device runs its streams' work in host order: the range opens now.
        return torch.npu.mstx.range_start(str(message))

    def deviceRangeEnd(self, range_handle: int, stream: int = 0) -> None:  # noqa: N802
        torch.npu.mstx.range_end(range_handle)


def apply() -> None:
    global _original
    if _original is not None:
        return
    _original = cuda_nvtx._nvtx
    cuda_nvtx._nvtx = NpuMarkers()


def revert() -> None:
    global _original
    if _original is None:
        return
    cuda_nvtx._nvtx = _original
    _original = None


def sites() -> tuple[str, ...]:
    return ("torch.cuda.nvtx._nvtx",)
