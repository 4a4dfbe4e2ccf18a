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
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Iterable

import torch
import torch.profiler as _torch_profiler
from torch._C._profiler import _ExperimentalConfig as _TorchExperimentalConfig
from torch.profiler import ProfilerAction, ProfilerActivity, record_function

__all__ = [
    "profile",
    "_KinetoProfile",
    "schedule",
    "tensorboard_trace_handler",
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
]


class ProfilerLevel:
    """How much Ascend hardware data to collect (no effect on the simulated device)."""

    Level_none = "Level_none"
    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"


class AiCMetrics:
    """AI Core hardware counters to collect (no effect on the simulated device)."""

    AiCoreNone = "ACL_AICORE_NONE"
    PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    ArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    Memory = "ACL_AICORE_MEMORY_BANDWIDTH"
    MemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    MemoryUB = "ACL_AICORE_MEMORY_UB"
    ResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    L2Cache = "ACL_AICORE_L2_CACHE"
    MemoryAccess = "ACL_AICORE_MEMORY_ACCESS"


class ExportType:
    """Format of the exported data: ``Text`` (traces) or ``Db`` (Ascend's database)."""

    Text = "text"
    Db = "db"


class HostSystem:
    """Host system data Ascend can sample alongside (no effect here)."""

    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"
    OSRT = "osrt"


def supported_activities() -> set[ProfilerActivity]:
    """The activities this build can profile: CPU and NPU."""
    return set(_torch_profiler.supported_activities()) & {ProfilerActivity.CPU, ProfilerActivity.NPU}


def supported_profiler_level() -> set[str]:
    return {ProfilerLevel.Level_none, ProfilerLevel.Level0, ProfilerLevel.Level1, ProfilerLevel.Level2}


def supported_ai_core_metrics() -> set[str]:
    return {value for name, value in vars(AiCMetrics).items() if not name.startswith("_")}


def supported_export_type() -> set[str]:
    return {ExportType.Text, ExportType.Db}


def _check_choice(name: str, value: Any, allowed: set[Any]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(map(str, allowed))}, got {value!r}")


class _ExperimentalConfig:
    """Ascend's extra profiling options; validated and kept, with no effect here.

    Every argument of the Ascend signature is accepted (see the module docstring for why
    none has an effect on the simulated device); unknown keywords are an error, as there.
    """

    def __init__(
        self,
        profiler_level: str = ProfilerLevel.Level0,
        aic_metrics: str = AiCMetrics.AiCoreNone,
        l2_cache: bool = False,
        msprof_tx: bool = False,
        mstx: bool = False,
        data_simplification: bool = True,
        record_op_args: bool = False,
        op_attr: bool = False,
        gc_detect_threshold: float | None = None,
        export_type: str | list[str] = ExportType.Text,
        host_sys: list[str] | None = None,
        mstx_domain_include: list[str] | None = None,
        mstx_domain_exclude: list[str] | None = None,
        sys_io: bool = False,
        sys_interconnection: bool = False,
    ) -> None:
        _check_choice("profiler_level", profiler_level, supported_profiler_level())
        _check_choice("aic_metrics", aic_metrics, supported_ai_core_metrics())
        export_types = [export_type] if isinstance(export_type, str) else list(export_type)
        for value in export_types:
            _check_choice("export_type", value, supported_export_type())
        for value in host_sys or []:
            _check_choice("host_sys", value, {HostSystem.CPU, HostSystem.MEM, HostSystem.DISK, HostSystem.NETWORK, HostSystem.OSRT})
        if gc_detect_threshold is not None and gc_detect_threshold < 0:
            raise ValueError(f"gc_detect_threshold must be None or >= 0, got {gc_detect_threshold!r}")
        self.profiler_level = profiler_level
        self.aic_metrics = aic_metrics
        self.l2_cache = bool(l2_cache)
        self.msprof_tx = bool(msprof_tx)
        self.mstx = bool(mstx)
        self.data_simplification = bool(data_simplification)
        self.record_op_args = bool(record_op_args)
        self.op_attr = bool(op_attr)
        self.gc_detect_threshold = gc_detect_threshold
        self.export_type = export_types
        self.host_sys = list(host_sys or [])
        self.mstx_domain_include = list(mstx_domain_include or [])
        self.mstx_domain_exclude = list(mstx_domain_exclude or [])
        self.sys_io = bool(sys_io)
        self.sys_interconnection = bool(sys_interconnection)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"torch_npu.profiler._ExperimentalConfig({fields})"


def _torch_profile_arguments(
    activities: Iterable[ProfilerActivity] | None, experimental_config: Any, use_cuda: bool | None
) -> tuple[Any, Any]:
    if use_cuda:
        raise ValueError("use_cuda=True is not supported by torch_npu.profiler; profile npu work with "
                         "activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]")
    if activities is not None:
        activities = list(activities)
        if not activities:
            raise ValueError("activities must name at least one of ProfilerActivity.CPU, ProfilerActivity.NPU")
        for activity in activities:
            if activity not in (ProfilerActivity.CPU, ProfilerActivity.NPU):
                raise ValueError(f"torch_npu.profiler profiles ProfilerActivity.CPU and ProfilerActivity.NPU, got {activity!r}")
    else:
        activities = [ProfilerActivity.CPU, ProfilerActivity.NPU]
    if experimental_config is None or isinstance(experimental_config, _TorchExperimentalConfig):
        return activities, experimental_config
    if not isinstance(experimental_config, _ExperimentalConfig):
        raise TypeError("experimental_config must be a torch_npu.profiler._ExperimentalConfig, got "
                        f"{type(experimental_config).__name__}")
    if ExportType.Db in experimental_config.export_type:
        warnings.warn(
            "torch_npu.profiler: ExportType.Db is an Ascend offline-analysis database, which the "
            "simulated npu does not produce; traces are exported as Chrome-trace JSON",
            UserWarning,
            stacklevel=3,
        )
    return activities, None


class profile(_torch_profiler.profile):
    """``torch.profiler.profile`` with the Ascend ``torch_npu.profiler.profile`` signature.

    Positional arguments are accepted in Ascend's order; ``activities`` defaults to CPU and
    NPU; ``experimental_config`` takes :class:`_ExperimentalConfig` (kept as
    ``self.npu_experimental_config``) or torch's own. Everything else is torch.profiler's.
    """

    def __init__(
        self,
        activities: Iterable[ProfilerActivity] | None = None,
        schedule: Callable[[int], ProfilerAction] | None = None,
        on_trace_ready: Callable[..., Any] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Any = None,
        use_cuda: bool | None = None,
        **kwargs: Any,
    ) -> None:
        self.npu_experimental_config = experimental_config
        torch_activities, torch_config = _torch_profile_arguments(activities, experimental_config, use_cuda)
        super().__init__(
            activities=torch_activities,
            schedule=schedule,
            on_trace_ready=on_trace_ready,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
            with_modules=with_modules,
            experimental_config=torch_config,
            **kwargs,
        )


class _KinetoProfile(_torch_profiler._KinetoProfile):
    """``torch.profiler._KinetoProfile`` (start/stop without a schedule) with Ascend's arguments."""

    def __init__(
        self,
        activities: Iterable[ProfilerActivity] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Any = None,
        **kwargs: Any,
    ) -> None:
        self.npu_experimental_config = experimental_config
        torch_activities, torch_config = _torch_profile_arguments(activities, experimental_config, None)
        super().__init__(
            activities=torch_activities,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
            with_modules=with_modules,
            experimental_config=torch_config,
            **kwargs,
        )


def schedule(wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """Ascend's ``schedule(wait, active, warmup=0, repeat=0, skip_first=0)``: torch.profiler.schedule."""
    for name, value in (("wait", wait), ("active", active), ("warmup", warmup), ("repeat", repeat), ("skip_first", skip_first)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"schedule: {name} must be a non-negative int, got {value!r}")
    if active < 1:
        raise ValueError("schedule: active must be at least 1")
    return _torch_profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)


def tensorboard_trace_handler(
    dir_name: str | os.PathLike | None = None,
    worker_name: str | None = None,
    analyse_flag: bool = True,
    async_mode: bool = False,
    use_gzip: bool = False,
) -> Callable[[Any], None]:
    """Writes each finished profiling cycle to ``dir_name`` as ``<worker>.<time>.pt.trace.json``.

    ``dir_name`` defaults to the current directory, as in Ascend's handler; ``analyse_flag``
    and ``async_mode`` select Ascend's offline analysis, which has nothing to do here.
    """
    del analyse_flag, async_mode
    return _torch_profiler.tensorboard_trace_handler(os.fspath(dir_name or "."), worker_name, use_gzip=use_gzip)
