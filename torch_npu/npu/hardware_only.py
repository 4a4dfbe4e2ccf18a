"""``torch.npu`` names that only mean something on a physical Ascend card.

They exist so that code written for the card imports and runs up to them. Health
checks and hint-only calls answer as a healthy, idle card would (documented below);
calls whose whole purpose needs hardware or its driver (operator data dumps, BLAS
handles, device fault injection, model obfuscation, dispatch-recorded graph updates)
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


_STRESS_DETECT_TYPES = ("aic", "hccs")


def stress_detect(detect_type="aic") -> int:
    """Hardware stress test of the AI cores (``"aic"``) or the card interconnect
    (``"hccs"``); 0 means healthy, as the simulated device always is."""
    if detect_type not in _STRESS_DETECT_TYPES:
        raise ValueError(f"stress_detect: detect_type must be one of {_STRESS_DETECT_TYPES}, got {detect_type!r}")
    return 0


def check_uce_in_memory(device_id: Any) -> int:
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


def restart_device(device_id: Any, rebuild_all_resources: bool = False, disable_tensor_unsafe_check: bool = False) -> NoReturn:
    """Restart a stopped card; raises (see ``stop_device``)."""
    _unsupported("restart_device", "fault recovery stops and restarts a physical card",
                 "Test recovery paths on hardware.")


def obfuscation_initialize(hidden_size, tp_rank, cmd, *, data_type=None, model_obf_seed_id=0, data_obf_seed_id=0,
                           thread_num=4, obf_coefficient=1.0) -> NoReturn:
    """Model obfuscation of the card's secure runtime; raises."""
    _unsupported("obfuscation_initialize", "model obfuscation runs in the card's secure runtime",
                 "Run the model without obfuscation on the simulator.")


def obfuscation_finalize(fd_to_close) -> NoReturn:
    """Model obfuscation of the card's secure runtime; raises."""
    _unsupported("obfuscation_finalize", "model obfuscation runs in the card's secure runtime",
                 "Run the model without obfuscation on the simulator.")


def obfuscation_calculate(fd, x, param, *, obf_coefficient=1.0) -> NoReturn:
    """Model obfuscation of the card's secure runtime; raises."""
    _unsupported("obfuscation_calculate", "model obfuscation runs in the card's secure runtime",
                 "Run the model without obfuscation on the simulator.")


def _check_scope_name(scope_name: Any) -> None:
    if scope_name is not None and not isinstance(scope_name, str):
        raise TypeError(f"scope_name must be a str or None, got {type(scope_name).__name__}")


def super_kernel_scope_begin(scope_name=None) -> None:
    """Start of a region whose kernels the card fuses into one launch. A performance hint:
    validated, no effect (each kernel runs on the host as it comes)."""
    _check_scope_name(scope_name)


def super_kernel_scope_end(scope_name=None) -> None:
    """End of a ``super_kernel_scope_begin`` region; no effect."""
    _check_scope_name(scope_name)


_GRAPH_TASK_WHY = ("updating operators recorded by dispatch (auto_dispatch_capture) needs the card's graph "
                   "runtime")
_GRAPH_TASK_INSTEAD = ("Update task groups with torch.npu.graph_task_group_begin/end and "
                       "graph_task_update_begin/end, or re-capture the graph.")


class NpuGraphOpHandler:
    """Base of handlers that update an operator's parameters inside a captured graph
    (``graph(..., auto_dispatch_capture=True)`` then ``NPUGraph.update``); instantiating
    one, and each of its hooks, raises on the simulator (task groups,
    ``graph_task_group_begin``, are the update path that works)."""

    def __init__(self) -> None:
        _unsupported("NpuGraphOpHandler", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)

    @staticmethod
    def prepare_capture(func, args, kwargs):
        """Hook before an operator is captured; raises on the simulator."""
        _unsupported("NpuGraphOpHandler.prepare_capture", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)

    @staticmethod
    def postprocess_result(result, kwargs):
        """Hook after an operator is captured; raises on the simulator."""
        _unsupported("NpuGraphOpHandler.postprocess_result", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)

    @staticmethod
    def update_args(dispatch_record, update_input):
        """New arguments of a captured operator; raises on the simulator."""
        _unsupported("NpuGraphOpHandler.update_args", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)

    @staticmethod
    def get_update_specs(op_name):
        """Which arguments of ``op_name`` can be updated; raises on the simulator."""
        _unsupported("NpuGraphOpHandler.get_update_specs", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)

    @staticmethod
    def record_wrap_kwarg(key, value, tensor_param_names):
        """Record one keyword argument of a captured operator; raises on the simulator."""
        _unsupported("NpuGraphOpHandler.record_wrap_kwarg", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)


def register_npu_graph_handler(op_names) -> NoReturn:
    """Register an ``NpuGraphOpHandler``; raises on the simulator."""
    _unsupported("register_npu_graph_handler", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)
