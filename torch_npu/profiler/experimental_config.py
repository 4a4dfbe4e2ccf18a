"""Ascend's ``_ExperimentalConfig`` and the option enums it takes (profiler level, AI Core
metrics, export type, host system sampling), with their ``supported_*`` lists.

These options describe data that Ascend's hardware and CANN stack collect. The simulated
npu has no such counters, so the options are validated and remembered (scripts that build
a config run, a wrong option is the same error) and change nothing in the trace; see the
package docstring for the one option that warns (``ExportType.Db``).
"""
from __future__ import annotations

from typing import Any

__all__ = [
    "ProfilerLevel",
    "AiCMetrics",
    "ExportType",
    "HostSystem",
    "_ExperimentalConfig",
    "supported_profiler_level",
    "supported_ai_core_metrics",
    "supported_export_type",
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


def _public_values(enum_class: type) -> set[str]:
    return {value for name, value in vars(enum_class).items() if not name.startswith("_")}


def supported_profiler_level() -> set[str]:
    return _public_values(ProfilerLevel)


def supported_ai_core_metrics() -> set[str]:
    return _public_values(AiCMetrics)


def supported_export_type() -> set[str]:
    return _public_values(ExportType)


def _check_choice(name: str, value: Any, allowed: set[Any]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(map(str, allowed))}, got {value!r}")


class _ExperimentalConfig:
    """Ascend's extra profiling options; validated and kept, with no effect here.

    Every argument of the Ascend signature is accepted, with Ascend's defaults; unknown
    keywords are an error, as there.
    """

    def __init__(
        self,
        profiler_level: str = ProfilerLevel.Level0,
        aic_metrics: str = AiCMetrics.PipeUtilization,
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
            _check_choice("host_sys", value, _public_values(HostSystem))
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
