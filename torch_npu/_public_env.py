"""The Ascend package's public environment variables and what each means on the simulator.

Scripts written for Ascend set these (``TASK_QUEUE_ENABLE=2``, ``ASCEND_LAUNCH_BLOCKING=1``,
``INF_NAN_MODE_ENABLE``...). Each is read here, through ``_env_settings``'s one rule and
error format, by the code it affects; ``PYTORCH_NO_NPU_MEMORY_CACHING`` is read by the C++
allocator (``csrc/runtime/allocator.cpp``). docs/runtime.md has the table of values and effects.
Values are read when asked for (nothing is cached); ``import torch_npu`` checks them all
once (``validate_all``), so a bad value stops the program at its start with a ``ValueError``
naming the variable and what it accepts, not in the middle of a run.
"""
from __future__ import annotations

import logging

from torch_npu import _env_settings

__all__ = [
    "launch_blocking",
    "task_queue_level",
    "inf_nan_mode",
    "combined_enable",
    "log_level",
    "apply_log_level",
    "hccl_async_error_handling",
    "hccl_desync_debug",
    "hccl_zero_copy",
    "validate_all",
]

_SWITCH = {0: "off", 1: "on"}


def launch_blocking() -> bool:
    """``ASCEND_LAUNCH_BLOCKING``: synchronous launches. The simulator runs every kernel
    when it is launched, so launches are always synchronous; 1 also turns the task queue off."""
    return _env_settings.read_level(
        "ASCEND_LAUNCH_BLOCKING", 0, {0: "asynchronous launches, the default", 1: "synchronous launches"}
    ) == 1


def task_queue_level() -> int:
    """``TASK_QUEUE_ENABLE``: 0 (off), 1 (level 1, the default) or 2 (level 2); forced to 0
    by ``ASCEND_LAUNCH_BLOCKING=1``, as on Ascend. Both are validated whichever wins."""
    level = _env_settings.read_level(
        "TASK_QUEUE_ENABLE", 1, {0: "task queue off", 1: "level 1, the default", 2: "level 2"}
    )
    return 0 if launch_blocking() else level


def inf_nan_mode() -> bool:
    """Whether the card is in INF/NAN mode (True) or saturation mode (False).

    Atlas A2/A3 cards default to INF/NAN mode and refuse ``INF_NAN_MODE_ENABLE=0`` unless
    ``INF_NAN_MODE_FORCE_DISABLE=1`` forces saturation mode; both are validated."""
    enable = _env_settings.read_level(
        "INF_NAN_MODE_ENABLE", 1, {0: "saturation mode", 1: "INF/NAN mode, the default"}
    )
    force_disable = _env_settings.read_level(
        "INF_NAN_MODE_FORCE_DISABLE", 0, {0: "INF_NAN_MODE_ENABLE decides, the default", 1: "saturation mode"}
    )
    del enable  # an A2/A3 card keeps INF/NAN mode unless forced
    return force_disable == 0


def combined_enable() -> bool:
    """``COMBINED_ENABLE``: Ascend's fused copy of non-contiguous views made by two view
    operations. The simulator's copy of any view is one strided cpu copy already."""
    return _env_settings.read_level(
        "COMBINED_ENABLE", 0, {0: "off, the default", 1: "combine two view operations into one copy"}
    ) == 1


# ASCEND_GLOBAL_LOG_LEVEL -> level of the "torch_npu" logger (4: nothing at all).
_LOG_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR, 4: logging.CRITICAL + 1}


def log_level() -> int | None:
    """The ``logging`` level ``ASCEND_GLOBAL_LOG_LEVEL`` asks for, or None when unset."""
    raw = _env_settings.read("ASCEND_GLOBAL_LOG_LEVEL")
    if raw is None:
        return None
    level = _env_settings.read_level(
        "ASCEND_GLOBAL_LOG_LEVEL", 3, {0: "debug", 1: "info", 2: "warning", 3: "error", 4: "null"}
    )
    return _LOG_LEVELS[level]


def apply_log_level() -> None:
    """Set the level of torch_npu's loggers from ``ASCEND_GLOBAL_LOG_LEVEL``; unset, logging
    is left as it is.

    ``torch._logging`` owns the ``torch_npu`` logger itself (``TORCH_LOGS=npu``) and resets
    it whenever it (re)reads ``TORCH_LOGS``, which ``import torch`` does after loading this
    package. So the level goes on the logger of each top-level module (``torch_npu.npu``,
    ``torch_npu.compiler``...), the nearest ancestor of every logger the package creates."""
    level = log_level()
    if level is None:
        return
    import pkgutil

    import torch_npu

    logging.getLogger("torch_npu").setLevel(level)
    for module in pkgutil.iter_modules(torch_npu.__path__):
        logging.getLogger(f"torch_npu.{module.name}").setLevel(level)


def hccl_async_error_handling() -> int:
    """``TORCH_HCCL_ASYNC_ERROR_HANDLING`` (validated). The hccl backend raises a failed or
    timed-out collective's error in the waiting thread and marks the group unusable, which
    is what 2 (CleanUpOnly) does; the process is never torn down (1, 3)."""
    return _env_settings.read_level(
        "TORCH_HCCL_ASYNC_ERROR_HANDLING", 2,
        {0: "NoHandling", 1: "TearDown", 2: "CleanUpOnly", 3: "SkipCleanUp"},
    )


def hccl_desync_debug() -> bool:
    """``TORCH_HCCL_DESYNC_DEBUG`` (validated). A failed collective's error always carries the
    desync report: which ranks arrived at which collective, and which did not."""
    return _env_settings.read_level("TORCH_HCCL_DESYNC_DEBUG", 0, _SWITCH) == 1


def hccl_zero_copy() -> bool:
    """``TORCH_HCCL_ZERO_COPY`` (validated, no effect): collectives on the simulator copy
    through host memory whatever it says."""
    return _env_settings.read_level("TORCH_HCCL_ZERO_COPY", 0, _SWITCH) == 1


def validate_all() -> None:
    """Read every variable once, so that a bad value is refused at ``import torch_npu``."""
    task_queue_level()
    inf_nan_mode()
    combined_enable()
    log_level()
    hccl_async_error_handling()
    hccl_desync_debug()
    hccl_zero_copy()
