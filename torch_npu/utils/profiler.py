"""Profile: profile one chosen training step and write its trace (Ascend's step profiler).

Training scripts call ``Profile(start_step=N).start()`` at the beginning and ``.end()``
at the end of every step; the N-th step is recorded with ``torch.profiler`` (cpu and npu
activities) and its chrome trace written under ``save_path``. ``Profile`` is a
``Singleton``: every call returns the instance made first, so the scripts' per-step calls
share one step count. ``profile_type`` names what Ascend records (TORCH, CANN, GE); on
the simulator all three record the torch-level trace.
"""
from __future__ import annotations

import os

__all__ = ["Profile", "Singleton"]

PROFILE_TYPES = ("TORCH", "CANN", "GE")


def Singleton(cls):
    """Decorator: the decorated class's constructor returns one shared instance."""
    instances = {}

    def get_instance(*args, **kwargs):
        if cls not in instances:
            instances[cls] = cls(*args, **kwargs)
        return instances[cls]

    get_instance.__wrapped_class__ = cls
    get_instance.__doc__ = cls.__doc__
    return get_instance


class _StepProfile:
    """Records step ``start_step`` (counted from 1 by ``start()`` calls) into ``save_path``."""

    def __init__(self, start_step: int = 10, save_path: str = "./npu_profiling", profile_type: str = None,
                 use_npu: bool = True, **kwargs):
        start_step = int(os.environ.get("PROFILE_START_STEP", start_step))
        if start_step < 1:
            raise ValueError(f"Profile: start_step must be >= 1, got {start_step}")
        profile_type = (profile_type or os.environ.get("PROFILE_TYPE", "TORCH")).upper()
        if profile_type not in PROFILE_TYPES:
            raise ValueError(f"Profile: profile_type must be one of {PROFILE_TYPES}, got {profile_type!r}")
        self.start_step = start_step
        self.save_path = save_path
        self.profile_type = profile_type
        self.use_npu = use_npu
        self.options = kwargs
        self.step = 0
        self.trace_file = None
        self._profiler = None

    def start(self):
        self.step += 1
        if self.step != self.start_step:
            return
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.use_npu:
            activities.append(torch.profiler.ProfilerActivity.PrivateUse1)
        self._profiler = torch.profiler.profile(activities=activities,
                                                record_shapes=bool(self.options.get("record_shape", True)))
        self._profiler.__enter__()

    def end(self):
        if self._profiler is None:
            return
        profiler, self._profiler = self._profiler, None
        profiler.__exit__(None, None, None)
        os.makedirs(self.save_path, exist_ok=True)
        self.trace_file = os.path.join(self.save_path, f"{self.profile_type.lower()}_step{self.step}_{os.getpid()}.json")
        profiler.export_chrome_trace(self.trace_file)


Profile = Singleton(_StepProfile)
