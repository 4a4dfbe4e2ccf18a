"""``torch.npu`` names that only mean something on a physical Ascend card.

They exist so that code written for the card imports and runs up to them. Health
checks and hint-only calls answer as a healthy, idle card would (documented below);
calls whose whole purpose needs hardware or its driver (operator data dumps, BLAS
handles, device fault injection, model obfuscation, captured-graph task updates)
raise a RuntimeError that says so and what to do instead, rather than silently doing
nothing.
"""
from __future__ import annotations

from typing import Any, NoReturn

from ._utils import _get_device_index

__all__ = [
    "set_dump",
    "init_dump",
    "finalize_dump",
    "utilization",
    "get_npu_overflow_flag",
    "clear_npu_overflow_flag",
    "stress_detect",
    "check_uce_in_memory",
    "current_blas_handle",
    "stop_device",
    "restart_device",
    "obfuscation_initialize",
    "obfuscation_finalize",
    "obfuscation_calculate",
    "super_kernel_scope_begin",
    "super_kernel_scope_end",
    "graph_task_group_begin",
    "graph_task_group_end",
    "graph_task_update_begin",
    "graph_task_update_end",
    "NpuGraphOpHandler",
    "register_npu_graph_handler",
]


def _unsupported(name: str, why: str, instead: str) -> NoReturn:
    raise RuntimeError(f"torch.npu.{name} is not available on the simulated NPU: {why}. {instead}")


def init_dump() -> None:
    """Operator data dump (ACL dump) of the card; raises on the simulator."""
    _unsupported("init_dump", "operator data dumps come from the Ascend driver",
                 "Inspect tensors directly, or use forward hooks / torch.profiler.")


def set_dump(cfg_file: str) -> None:
    """Operator data dump configuration (ACL dump); raises on the simulator."""
    _unsupported("set_dump", "operator data dumps come from the Ascend driver",
                 "Inspect tensors directly, or use forward hooks / torch.profiler.")


def finalize_dump() -> None:
    """End of an operator data dump (ACL dump); raises on the simulator."""
    _unsupported("finalize_dump", "operator data dumps come from the Ascend driver",
                 "Inspect tensors directly, or use forward hooks / torch.profiler.")


def utilization(device: Any = None) -> int:
    """Percent of time the AI cores were busy over the last sample period. The simulated
    device has no AI cores to sample: always 0 (validates ``device``)."""
    _get_device_index(device, optional=True)
    return 0


def get_npu_overflow_flag() -> bool:
    """Whether a float16 overflow happened in saturation mode. The simulator computes in
    IEEE mode (overflow gives inf, as on 910B's INF/NAN mode), so the flag is never set."""
    return False


def clear_npu_overflow_flag() -> None:
    """Clear the overflow flag (never set on the simulator, see ``get_npu_overflow_flag``)."""


def stress_detect(mode: int = 0) -> int:
    """Hardware stress test of the AI cores; 0 means healthy, as the simulated device always is."""
    return 0


def check_uce_in_memory(device_id: Any = None) -> int:
    """Uncorrectable memory errors of the device; 0 (none): host memory has no device ECC to report."""
    _get_device_index(device_id, optional=True)
    return 0


def current_blas_handle() -> NoReturn:
    """The card's BLAS handle; raises (matmuls run in the host BLAS of the CPU kernels)."""
    _unsupported("current_blas_handle", "matmuls run in the CPU kernels' BLAS, which has no handle",
                 "Call torch.matmul and friends; nothing needs a handle.")


def stop_device(device_id: Any) -> NoReturn:
    """Stop a card for fault recovery; raises (no device to stop)."""
    _unsupported("stop_device", "fault recovery stops and restarts a physical card",
                 "Test recovery paths on hardware.")


def restart_device(device_id: Any, rebuild_all_resources: bool = False) -> NoReturn:
    """Restart a stopped card; raises (see ``stop_device``)."""
    _unsupported("restart_device", "fault recovery stops and restarts a physical card",
                 "Test recovery paths on hardware.")


def obfuscation_initialize(*args: Any, **kwargs: Any) -> NoReturn:
    """Model obfuscation of the card's secure runtime; raises."""
    _unsupported("obfuscation_initialize", "model obfuscation runs in the card's secure runtime",
                 "Run the model without obfuscation on the simulator.")


def obfuscation_finalize(*args: Any, **kwargs: Any) -> NoReturn:
    """Model obfuscation of the card's secure runtime; raises."""
    _unsupported("obfuscation_finalize", "model obfuscation runs in the card's secure runtime",
                 "Run the model without obfuscation on the simulator.")


def obfuscation_calculate(*args: Any, **kwargs: Any) -> NoReturn:
    """Model obfuscation of the card's secure runtime; raises."""
    _unsupported("obfuscation_calculate", "model obfuscation runs in the card's secure runtime",
                 "Run the model without obfuscation on the simulator.")


def super_kernel_scope_begin(*args: Any, **kwargs: Any) -> None:
    """Start of a region whose kernels the card fuses into one launch. A performance hint:
    accepted, no effect (each kernel runs on the host as it comes)."""


def super_kernel_scope_end(*args: Any, **kwargs: Any) -> None:
    """End of a ``super_kernel_scope_begin`` region; no effect."""


_GRAPH_TASK_WHY = "updating the parameters of tasks inside a captured graph needs the card's graph runtime"
_GRAPH_TASK_INSTEAD = "Re-capture the graph with the new parameters, or keep them in static input tensors."


def graph_task_group_begin(*args: Any, **kwargs: Any) -> NoReturn:
    """Group captured tasks for a later update; raises on the simulator."""
    _unsupported("graph_task_group_begin", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)


def graph_task_group_end(*args: Any, **kwargs: Any) -> NoReturn:
    """End a captured task group; raises on the simulator."""
    _unsupported("graph_task_group_end", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)


def graph_task_update_begin(*args: Any, **kwargs: Any) -> NoReturn:
    """Start updating a captured task group; raises on the simulator."""
    _unsupported("graph_task_update_begin", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)


def graph_task_update_end(*args: Any, **kwargs: Any) -> NoReturn:
    """End updating a captured task group; raises on the simulator."""
    _unsupported("graph_task_update_end", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)


class NpuGraphOpHandler:
    """Base of handlers that update an operator's parameters inside a captured graph;
    instantiating one raises on the simulator (see ``graph_task_update_begin``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _unsupported("NpuGraphOpHandler", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)


def register_npu_graph_handler(*args: Any, **kwargs: Any) -> NoReturn:
    """Register an ``NpuGraphOpHandler``; raises on the simulator."""
    _unsupported("register_npu_graph_handler", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)
