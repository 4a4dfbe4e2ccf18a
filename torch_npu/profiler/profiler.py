"""Ascend's ``torch_npu.profiler.profile`` (and ``_KinetoProfile``), its trace handler and the
offline ``analyse`` entry point, over ``torch.profiler``.

``profile`` *is* a ``torch.profiler.profile``: ``start``/``stop``/``step``,
``get_trace_id``/``set_custom_trace_id_callback``, ``key_averages()`` and
``export_chrome_trace()`` are torch's, with Ascend's keyword-only signature, CPU+NPU as the
default activities and Ascend's :class:`_ExperimentalConfig` accepted. Each profiling cycle
reads the child-thread request (see ``child_threads``) when it starts.

Traces are PyTorch's Chrome-trace JSON (``*.pt.trace.json``), complete when written; there is
no CANN raw data to analyse afterwards, so ``analyse_flag``/``async_mode`` of the handler
select nothing and ``analyse`` checks that a result directory holds traces.
"""
from __future__ import annotations

import glob
import os
import warnings
from typing import Any, Callable, Iterable

import torch.profiler as _torch_profiler
from torch._C._profiler import _ExperimentalConfig as _TorchExperimentalConfig
from torch.profiler import ProfilerAction, ProfilerActivity

from . import child_threads
from .experimental_config import ExportType, _ExperimentalConfig, supported_export_type
from .profiler_interface import supported_activities

__all__ = ["profile", "_KinetoProfile", "tensorboard_trace_handler", "analyse", "supported_activities"]

_TRACE_PATTERN = "*.pt.trace.json*"


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
            stacklevel=4,
        )
    return activities, None


_SESSION_OPTIONS = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")


class _ChildThreadAware:
    """Mixin: each cycle's ``prepare_trace`` applies the current child-thread request."""

    def _remember_session_options(self) -> None:
        self._own_options = {name: getattr(self, name) for name in _SESSION_OPTIONS}
        self._own_torch_config = self.experimental_config

    def prepare_trace(self) -> None:
        request = child_threads.current()
        for name, value in self._own_options.items():
            setattr(self, name, value or bool(request and getattr(request, name)))
        if request is None:
            self.experimental_config = self._own_torch_config
        elif self._own_torch_config is None:
            self.experimental_config = _TorchExperimentalConfig(profile_all_threads=True)
        elif not self._own_torch_config.profile_all_threads:
            warnings.warn("torch_npu.profiler: child-thread profiling needs profile_all_threads=True in the "
                          "torch experimental_config given to profile(); child threads are not recorded",
                          UserWarning, stacklevel=3)
        super().prepare_trace()

    @staticmethod
    def enable_profiler_in_child_thread(record_shapes: bool = False, profile_memory: bool = False,
                                        with_stack: bool = False, with_flops: bool = False,
                                        with_modules: bool = False) -> None:
        """Record operators issued from every thread in the profiling cycles that start from
        now on, with these options added to the session's; undone by
        ``disable_profiler_in_child_thread``."""
        child_threads.enable(child_threads.ChildThreadOptions(
            bool(record_shapes), bool(profile_memory), bool(with_stack), bool(with_flops), bool(with_modules)))

    @staticmethod
    def disable_profiler_in_child_thread() -> None:
        """Stop recording other threads' operators from the next profiling cycle on."""
        child_threads.disable()


class profile(_ChildThreadAware, _torch_profiler.profile):
    """``torch.profiler.profile`` with the Ascend ``torch_npu.profiler.profile`` signature.

    ``activities`` defaults to CPU and NPU; ``experimental_config`` takes
    :class:`_ExperimentalConfig` (kept as ``self.npu_experimental_config``) or torch's own.
    Further keywords are torch.profiler's.
    """

    def __init__(
        self,
        *,
        activities: Iterable[ProfilerActivity] | None = None,
        schedule: Callable[[int], ProfilerAction] | None = None,
        on_trace_ready: Callable[..., Any] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Any = None,
        custom_trace_id_callback: Callable[[], str] | None = None,
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
            custom_trace_id_callback=custom_trace_id_callback,
            **kwargs,
        )
        self._remember_session_options()


class _KinetoProfile(_ChildThreadAware, _torch_profiler._KinetoProfile):
    """``torch.profiler._KinetoProfile`` (start/stop without a schedule) with Ascend's arguments."""

    def __init__(
        self,
        *,
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
        self._remember_session_options()


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


def analyse(profiler_path: str, max_process_number: int = 320, export_type: str | list | None = None) -> None:
    """Ascend's offline analysis of a profiling result directory.

    Traces written here are complete Chrome-trace JSON already, so the analysis is the check
    that ``profiler_path`` is a result directory holding at least one trace (searched
    recursively); arguments are validated as Ascend validates them.
    """
    if not isinstance(profiler_path, (str, os.PathLike)):
        raise TypeError(f"analyse: profiler_path must be a path, got {type(profiler_path).__name__}")
    if isinstance(max_process_number, bool) or not isinstance(max_process_number, int) or max_process_number < 1:
        raise ValueError(f"analyse: max_process_number must be a positive int, got {max_process_number!r}")
    export_types = [] if export_type is None else [export_type] if isinstance(export_type, str) else list(export_type)
    for value in export_types:
        if value not in supported_export_type():
            raise ValueError(f"analyse: export_type must be among {sorted(supported_export_type())}, got {value!r}")
    path = os.fspath(profiler_path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"analyse: {path!r} is not a profiling result directory")
    if not glob.glob(os.path.join(path, "**", _TRACE_PATTERN), recursive=True):
        raise FileNotFoundError(f"analyse: no profiler trace ({_TRACE_PATTERN}) under {path!r}; write one "
                                "with torch_npu.profiler.tensorboard_trace_handler(dir_name)")
    return None
