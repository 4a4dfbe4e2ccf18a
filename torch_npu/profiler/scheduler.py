"""Ascend's profiling schedule: ``Schedule`` (exported as ``torch_npu.profiler.schedule``)
and the ``ProfilerAction`` it answers, which is torch.profiler's own enum.

Ascend's ``schedule`` is a class whose instances map a step number to an action; here the
instance validates Ascend's arguments and answers with ``torch.profiler.schedule``'s
function, so a schedule drives ``torch.profiler.profile`` exactly as torch's would.
"""
from __future__ import annotations

import torch.profiler as _torch_profiler
from torch.profiler import ProfilerAction

__all__ = ["ProfilerAction", "Schedule"]


class Schedule:
    """Steps: ``skip_first``, then cycles of ``wait``, ``warmup``, ``active`` (``repeat``
    cycles, 0 = until the end); ``skip_first_wait=1`` drops the first cycle's wait."""

    def __init__(self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0,
                 skip_first_wait: int = 0) -> None:
        for name, value in (("wait", wait), ("active", active), ("warmup", warmup), ("repeat", repeat),
                            ("skip_first", skip_first), ("skip_first_wait", skip_first_wait)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"schedule: {name} must be a non-negative int, got {value!r}")
        if active < 1:
            raise ValueError("schedule: active must be at least 1")
        self.wait, self.active, self.warmup = wait, active, warmup
        self.repeat, self.skip_first, self.skip_first_wait = repeat, skip_first, skip_first_wait
        self._action = _torch_profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat,
                                                skip_first=skip_first, skip_first_wait=skip_first_wait)

    def __call__(self, step: int) -> ProfilerAction:
        if step < 0:
            raise ValueError(f"schedule: step must be >= 0, got {step}")
        return self._action(step)

    def __repr__(self) -> str:
        return (f"torch_npu.profiler.schedule(wait={self.wait}, active={self.active}, warmup={self.warmup}, "
                f"repeat={self.repeat}, skip_first={self.skip_first}, skip_first_wait={self.skip_first_wait})")
