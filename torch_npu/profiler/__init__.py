"""``torch_npu.profiler``: the profiler names Ascend scripts import, mapped onto torch.profiler.

Scripts written for the Ascend package profile with::

    import torch_npu
    cfg = torch_npu.profiler._ExperimentalConfig(profiler_level=torch_npu.profiler.ProfilerLevel.Level1)
    with torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        schedule=torch_npu.profiler.schedule(wait=1, warmup=1, active=2),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./result"),
        experimental_config=cfg,
    ) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()

Here the same code runs ``torch.profiler.profile`` itself: ``ProfilerActivity`` *is*
torch's enum (``NPU`` is PrivateUse1 under its npu name), and the npu work comes from the
runtime's Kineto activity profiler, so the result is an ordinary PyTorch profile
(``key_averages()`` with npu time per op, ``export_chrome_trace()``, TensorBoard traces
from ``tensorboard_trace_handler``).

What has no meaning on the simulated device is accepted and has no effect: the
``_ExperimentalConfig`` fields (profiler level, AI Core metrics, L2 cache, msprof_tx/mstx,
op_attr, record_op_args, data simplification, host system sampling, gc detection) describe
data collected by the Ascend hardware and CANN stack. ``ExportType.Db`` asks for a database
that only Ascend's offline analysis writes, so it warns; traces are always written as
PyTorch's Chrome-trace JSON (``*.pt.trace.json``), not Ascend's ``ASCEND_PROFILER_OUTPUT``
directory layout. ``tensorboard_trace_handler``'s ``analyse_flag`` and ``async_mode`` are
accepted for the same reason: there is no offline analysis to run.

This package is a face over modules by concern: ``experimental_config`` (the option enums
and ``_ExperimentalConfig``), ``scheduler`` (``schedule``), ``profiler`` (``profile``, the
trace handler, ``analyse``), ``profiler_interface`` (``supported_activities``),
``child_threads`` (profiling of other threads) and ``dynamic_profile`` (profiling driven by a
config file edited while training runs; imported on first use).
"""
from __future__ import annotations

from torch.profiler import ProfilerActivity, record_function

from .experimental_config import (
    AiCMetrics,
    ExportType,
    HostSystem,
    ProfilerLevel,
    _ExperimentalConfig,
    supported_ai_core_metrics,
    supported_export_type,
    supported_profiler_level,
)
from .profiler import _KinetoProfile, analyse, profile, tensorboard_trace_handler
from .profiler_interface import supported_activities
from .scheduler import ProfilerAction, Schedule

# Ascend exports its schedule class under this lower-case name.
schedule = Schedule

__all__ = [
    "profile",
    "_KinetoProfile",
    "schedule",
    "tensorboard_trace_handler",
    "analyse",
    "ProfilerActivity",
    "ProfilerAction",
    "ProfilerLevel",
    "AiCMetrics",
    "ExportType",
    "HostSystem",
    "_ExperimentalConfig",
    "supported_activities",
    "supported_profiler_level",
    "supported_ai_core_metrics",
    "supported_export_type",
    "record_function",
    "dynamic_profile",
]


def __getattr__(name: str):
    # dynamic_profile is a submodule scripts reach as an attribute; it loads on first use.
    if name == "dynamic_profile":
        import importlib

        return importlib.import_module(f"{__name__}.dynamic_profile")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
