"""Start-up configuration that Ascend scripts set and that changes nothing on a simulator.

Real Ascend cards choose operator compilation (JIT or prebuilt binaries), internal data
formats (NZ, 5HD), HF32 matmul/conv precision, AOE auto-tuning, the task queue and core
limits here. The simulated NPU computes every operator with the CPU kernel in the dtype
asked for, so these calls are accepted, validated as the Ascend package validates them,
and remembered (the getters return what was set) without changing a result:

- ``set_compile_mode(jit_compile=...)``, ``is_jit_compile_false()``
- ``set_option({...})`` (string keys and values)
- ``set_aoe(dump_path)`` (creates the dump directory, as Ascend does; no tuning runs)
- ``set_mm_bmm_format_nd(bool)`` / ``get_mm_bmm_format_nd()``
- ``config.allow_internal_format``, ``matmul.allow_hf32``, ``conv.allow_hf32``
- ``set_task_queue_enable`` / ``get_task_queue_enable``, ``set_op_timeout_ms``
- ``set_device_limit`` / ``get_device_limit``, ``set_stream_limit`` / ``get_stream_limit`` /
  ``reset_stream_limit`` (core limits for operators; reported back, not enforced)
- ``use_compatible_impl`` / ``are_compatible_impl_enabled``, ``CubeMathType``
"""
from __future__ import annotations

import enum
import os
from typing import Any

import torch

from torch_npu import _public_env

from ._utils import _get_device_index

__all__ = [
    "set_compile_mode",
    "is_jit_compile_false",
    "set_option",
    "set_aoe",
    "set_mm_bmm_format_nd",
    "get_mm_bmm_format_nd",
    "config",
    "matmul",
    "conv",
    "CubeMathType",
    "set_task_queue_enable",
    "get_task_queue_enable",
    "set_op_timeout_ms",
    "set_device_limit",
    "get_device_limit",
    "set_stream_limit",
    "get_stream_limit",
    "reset_stream_limit",
    "use_compatible_impl",
    "are_compatible_impl_enabled",
]

_options: dict[str, str] = {}
_state: dict[str, Any] = {
    "jit_compile": False,
    "mm_bmm_format_nd": True,
    "task_queue_enable": None,  # None: as TASK_QUEUE_ENABLE / ASCEND_LAUNCH_BLOCKING say
    "op_timeout_ms": None,
    "compatible_impl": False,
}
_device_limits: dict[int, dict[str, int]] = {}
_stream_limits: dict[tuple[int, int], dict[str, int]] = {}


def _check_bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be a bool, got {type(value).__name__}")
    return value


def set_compile_mode(jit_compile=False) -> None:
    """Choose JIT operator compilation (True) or prebuilt operator binaries (False).
    Operators are CPU kernels on the simulator: remembered, no effect."""
    _state["jit_compile"] = _check_bool(jit_compile, "jit_compile")
    _options["jitCompile"] = "enable" if jit_compile else "disable"


def is_jit_compile_false() -> bool:
    """True when ``set_compile_mode(jit_compile=False)`` is in force."""
    return not _state["jit_compile"]


def set_option(option: dict[str, str]) -> None:
    """Set Ascend runtime options (``{"ACL_OP_SELECT_IMPL_MODE": "high_precision", ...}``).
    Validated (a dict of strings) and remembered; no option changes a simulated result."""
    if not isinstance(option, dict):
        raise TypeError("npu option must be a dict.")
    for key, value in option.items():
        if not isinstance(key, str):
            raise TypeError(f"option name must be a str, got {type(key).__name__}")
        if not isinstance(value, str):
            raise TypeError(f"option value of {key!r} must be a str, got {type(value).__name__}")
    _options.update(option)


def _get_option(name: str) -> str | None:
    return _options.get(name)


def set_aoe(dump_path: str) -> None:
    """Turn on AOE auto-tuning with graphs dumped under ``dump_path``. The directory is
    created, as on Ascend; there is nothing to tune on the simulator."""
    if not isinstance(dump_path, str | os.PathLike):
        raise TypeError(f"dump_path must be a path, got {type(dump_path).__name__}")
    try:
        os.makedirs(dump_path, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"the path of '{dump_path}' is invalid: {exc}") from exc
    _options.update({"autotune": "enable", "autotunegraphdumppath": os.fspath(dump_path)})


def set_mm_bmm_format_nd(is_nd: bool = True) -> None:
    """Keep matmul/bmm operands in ND format (True) or let them take NZ. Tensors are
    always ND on the simulator: remembered, no effect."""
    _state["mm_bmm_format_nd"] = _check_bool(is_nd, "is_nd")


def get_mm_bmm_format_nd() -> bool:
    """What ``set_mm_bmm_format_nd`` set (True by default)."""
    return _state["mm_bmm_format_nd"]


class _Flags:
    """A group of boolean switches, like ``torch.backends.cuda.matmul``."""

    def __init__(self, name: str, **defaults: bool) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_values", dict(defaults))

    def __getattr__(self, key: str) -> bool:
        values = object.__getattribute__(self, "_values")
        if key in values:
            return values[key]
        raise AttributeError(f"torch.npu.{object.__getattribute__(self, '_name')} has no setting {key!r}")

    def __setattr__(self, key: str, value: Any) -> None:
        values = object.__getattribute__(self, "_values")
        if key not in values:
            raise AttributeError(
                f"torch.npu.{object.__getattribute__(self, '_name')} has no setting {key!r}; "
                f"known: {', '.join(sorted(values))}"
            )
        values[key] = _check_bool(value, f"torch.npu.{self._name}.{key}")

    def __repr__(self) -> str:
        return f"<torch.npu.{self._name} {self._values}>"


# allow_internal_format: whether operators may keep NPU-private formats (NZ, 5HD);
# allow_hf32: whether matmul/conv may compute float32 in HF32. Neither changes a
# result on the simulator (float32 is computed in float32).
config = _Flags("config", allow_internal_format=False)
matmul = _Flags("matmul", allow_hf32=False)
conv = _Flags("conv", allow_hf32=True)


class CubeMathType(enum.IntEnum):
    """How cube (matrix) units may lower float32 precision, as Ascend's ``cube_math_type``."""

    KEEP_DTYPE = 0
    ALLOW_FP32_DOWN_PRECISION = 1
    USE_FP16 = 2
    USE_HF32 = 3


def set_task_queue_enable(enable: bool) -> None:
    """Turn the host task queue on (at the level ``TASK_QUEUE_ENABLE`` chose, 1 if it chose
    0) or off; ``ASCEND_LAUNCH_BLOCKING=1`` keeps it off. Launches are synchronous on the
    simulator whatever the queue says."""
    _state["task_queue_enable"] = _check_bool(enable, "enable")


def get_task_queue_enable() -> int:
    """The task queue level: 0 (off), 1 or 2 (``TASK_QUEUE_ENABLE``, default 1), 0 under
    ``ASCEND_LAUNCH_BLOCKING=1``, and what ``set_task_queue_enable`` changed."""
    level = _public_env.task_queue_level()
    chosen = _state["task_queue_enable"]
    if chosen is None or _public_env.launch_blocking():
        return level
    return max(level, 1) if chosen else 0


def set_op_timeout_ms(timeout: int) -> None:
    """Operator execution timeout on the device; remembered (nothing on the simulator hangs)."""
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0:
        raise ValueError(f"timeout must be a non-negative int (milliseconds), got {timeout!r}")
    _state["op_timeout_ms"] = timeout


def _check_core_num(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < -1 or value == 0:
        raise ValueError(f"{what} must be a positive int, or -1 to keep the current value; got {value!r}")
    return value


def _device_limit_arguments(device: Any, cube_num: int = -1, vector_num: int = -1) -> tuple[Any, int, int]:
    return device, cube_num, vector_num


def set_device_limit(*args, **kwargs) -> None:
    """``set_device_limit(device, cube_num=-1, vector_num=-1)``: limit how many cube/vector
    cores operators of ``device`` may use (reported by ``get_device_limit``; the simulator
    runs on host threads and does not enforce it)."""
    try:
        device, cube_num, vector_num = _device_limit_arguments(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"set_device_limit(device, cube_num=-1, vector_num=-1): {exc}") from None
    index = _get_device_index(device, optional=True)
    limits = get_device_limit(index)
    cube = _check_core_num(cube_num, "cube_num")
    vector = _check_core_num(vector_num, "vector_num")
    if cube != -1:
        limits["cube_core_num"] = cube
    if vector != -1:
        limits["vector_core_num"] = vector
    _device_limits[index] = limits


def get_device_limit(device: Any) -> dict[str, int]:
    """``{"cube_core_num": n, "vector_core_num": m}`` for ``device`` (default: the card's cores)."""
    index = _get_device_index(device, optional=True)
    if index in _device_limits:
        return dict(_device_limits[index])
    props = torch.npu.get_device_properties(index)
    return {"cube_core_num": props.cube_core_num, "vector_core_num": props.vector_core_num}


def _stream_key(stream: Any) -> tuple[int, int]:
    if not isinstance(stream, torch.Stream) or stream.device.type != "npu":
        raise TypeError(f"expected an npu stream, got {stream!r}")
    return (stream.device_index, stream.stream_id)


def set_stream_limit(stream: Any, cube_num: int = -1, vector_num: int = -1) -> None:
    """Limit the cores operators on ``stream`` may use (reported, not enforced)."""
    key = _stream_key(stream)
    limits = get_stream_limit(stream)
    cube = _check_core_num(cube_num, "cube_num")
    vector = _check_core_num(vector_num, "vector_num")
    if cube != -1:
        limits["cube_core_num"] = cube
    if vector != -1:
        limits["vector_core_num"] = vector
    _stream_limits[key] = limits


def get_stream_limit(stream: Any) -> dict[str, int]:
    """The core limits of ``stream`` (default: its device's limits)."""
    key = _stream_key(stream)
    if key in _stream_limits:
        return dict(_stream_limits[key])
    return get_device_limit(key[0])


def reset_stream_limit(stream: Any) -> None:
    """Drop the core limits of ``stream``."""
    _stream_limits.pop(_stream_key(stream), None)


def use_compatible_impl(is_enable: bool) -> None:
    """Prefer operator implementations compatible with other backends' numerics. The
    simulator's operators are the CPU ones already: remembered, no effect."""
    _state["compatible_impl"] = _check_bool(is_enable, "is_enable")


def are_compatible_impl_enabled() -> bool:
    """What ``use_compatible_impl`` set (False by default)."""
    return _state["compatible_impl"]
