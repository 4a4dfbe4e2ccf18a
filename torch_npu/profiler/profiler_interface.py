"""Which activities this build can profile, the question Ascend's profiler interface answers."""
from __future__ import annotations

import torch.profiler as _torch_profiler
from torch.profiler import ProfilerActivity

__all__ = ["supported_activities"]


def supported_activities() -> set[ProfilerActivity]:
    """The activities this build can profile: CPU and NPU."""
    return set(_torch_profiler.supported_activities()) & {ProfilerActivity.CPU, ProfilerActivity.NPU}
