"""Ascend's dynamic profiling: profile a running training job by editing a config file.

Protocol (Ascend's ``profiler_config.json``)::

    from torch_npu.profiler import dynamic_profile as dp
    dp.init("./prof_cfg")          # writes ./prof_cfg/profiler_config.json (template, idle)
    for batch in loader:
        train_step(batch)
        dp.step()                  # one training step ends

While the job runs, the user edits ``profiler_config.json``: setting ``start_step`` to N
(> 0) asks for a collection that starts at step N (at the next step if N is already past)
and records ``warmup`` + ``active`` steps; the trace is written to ``prof_dir`` as Chrome
JSON. Each new save of the file is a new request; ``start_step: 0`` (the template) is idle.
``dp.start(config_path)`` begins one collection at once from a config file. ``is_rank`` with
``rank_list`` restricts collection to those ranks. A bad file never stops training: it is
reported with a warning and ignored.

A relative ``prof_dir`` is a folder of the job's working directory. A collection still
running when the process exits is stopped and written at exit. ``dp.step()`` only looks at the file's modification stamp (one ``stat``); the file is read
when that changes.
"""
from __future__ import annotations

import atexit
import json
import os
import threading
import warnings
from typing import Any

import torch
from torch.profiler import ProfilerActivity

from .experimental_config import AiCMetrics, ExportType, ProfilerLevel, _ExperimentalConfig
from .profiler import profile, tensorboard_trace_handler
from .scheduler import Schedule

__all__ = ["init", "step", "start", "set_state"]

CONFIG_FILE_NAME = "profiler_config.json"

_TEMPLATE: dict[str, Any] = {
    "activities": ["CPU", "NPU"],
    "prof_dir": "./",
    "analyse": False,
    "record_shapes": False,
    "profile_memory": False,
    "with_stack": False,
    "with_flops": False,
    "with_modules": False,
    "active": 1,
    "warmup": 0,
    "start_step": 0,
    "is_rank": False,
    "rank_list": [],
    "experimental_config": {
        "profiler_level": "Level0",
        "aic_metrics": "AiCoreNone",
        "l2_cache": False,
        "op_attr": False,
        "gc_detect_threshold": None,
        "data_simplification": True,
        "record_op_args": False,
        "export_type": ["text"],
        "msprof_tx": False,
        "mstx": False,
        "host_sys": [],
        "sys_io": False,
        "sys_interconnection": False,
    },
}

_ACTIVITIES = {"CPU": ProfilerActivity.CPU, "NPU": ProfilerActivity.NPU}


class DynamicProfileConfigError(ValueError):
    """A ``profiler_config.json`` that cannot be used, with the field at fault."""


def _enum_value(enum_class: type, value: Any, field: str) -> Any:
    # The file names enum members (``"Level1"``, ``"PipeUtilization"``) or their values.
    members = {name: v for name, v in vars(enum_class).items() if not name.startswith("_")}
    if value in members:
        return members[value]
    if value in members.values():
        return value
    raise DynamicProfileConfigError(f"experimental_config.{field} must be one of {sorted(members)}, got {value!r}")


def _experimental_config(section: Any) -> _ExperimentalConfig:
    if not isinstance(section, dict):
        raise DynamicProfileConfigError(f"experimental_config must be an object, got {section!r}")
    options = dict(section)
    if "profiler_level" in options:
        options["profiler_level"] = _enum_value(ProfilerLevel, options["profiler_level"], "profiler_level")
    if "aic_metrics" in options:
        options["aic_metrics"] = _enum_value(AiCMetrics, options["aic_metrics"], "aic_metrics")
    if "export_type" in options:
        kinds = options["export_type"]
        kinds = [kinds] if isinstance(kinds, str) else kinds
        options["export_type"] = [_enum_value(ExportType, kind, "export_type") for kind in kinds]
    try:
        return _ExperimentalConfig(**options)
    except (TypeError, ValueError) as error:
        raise DynamicProfileConfigError(f"experimental_config: {error}") from None


def _non_negative_int(config: dict, field: str, minimum: int = 0) -> int:
    value = config.get(field, _TEMPLATE[field])
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DynamicProfileConfigError(f"{field} must be an int >= {minimum}, got {value!r}")
    return value


class _Request:
    """One parsed config file: what to collect and from which step."""

    def __init__(self, config: Any) -> None:
        if not isinstance(config, dict):
            raise DynamicProfileConfigError("the config must be a JSON object")
        unknown = set(config) - set(_TEMPLATE)
        if unknown:
            raise DynamicProfileConfigError(f"unknown fields {sorted(unknown)}; the fields are {sorted(_TEMPLATE)}")
        self.start_step = _non_negative_int(config, "start_step")
        self.active = _non_negative_int(config, "active", minimum=1)
        self.warmup = _non_negative_int(config, "warmup")
        activities = config.get("activities", _TEMPLATE["activities"])
        if not isinstance(activities, list) or not activities or any(a not in _ACTIVITIES for a in activities):
            raise DynamicProfileConfigError(f"activities must be a non-empty list of 'CPU'/'NPU', got {activities!r}")
        self.activities = [_ACTIVITIES[a] for a in activities]
        prof_dir = config.get("prof_dir", _TEMPLATE["prof_dir"])
        if not isinstance(prof_dir, str) or not prof_dir:
            raise DynamicProfileConfigError(f"prof_dir must be a directory path, got {prof_dir!r}")
        self.prof_dir = os.path.abspath(prof_dir)  # a relative prof_dir names a folder of the job's cwd
        self.options = {}
        for field in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules", "analyse", "is_rank"):
            value = config.get(field, _TEMPLATE[field])
            if not isinstance(value, bool):
                raise DynamicProfileConfigError(f"{field} must be true or false, got {value!r}")
            self.options[field] = value
        rank_list = config.get("rank_list", [])
        if not isinstance(rank_list, list) or any(isinstance(r, bool) or not isinstance(r, int) for r in rank_list):
            raise DynamicProfileConfigError(f"rank_list must be a list of ints, got {rank_list!r}")
        self.rank_list = rank_list
        self.experimental_config = _experimental_config(config.get("experimental_config", {}))

    def selects_this_rank(self) -> bool:
        return not self.options["is_rank"] or _current_rank() in self.rank_list

    def new_profile(self) -> profile:
        # The schedule's cycle is the whole collection; after it the session has nothing left
        # to record and is stopped by the controller.
        return profile(
            activities=self.activities,
            schedule=Schedule(wait=0, warmup=self.warmup, active=self.active, repeat=1),
            on_trace_ready=tensorboard_trace_handler(self.prof_dir),
            experimental_config=self.experimental_config,
            **{k: v for k, v in self.options.items() if k not in ("analyse", "is_rank")},
        )


def _current_rank() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def _read_request(path: str) -> _Request:
    try:
        with open(path, encoding="utf-8") as file:
            config = json.load(file)
    except (OSError, json.JSONDecodeError) as error:
        raise DynamicProfileConfigError(f"cannot read {path}: {error}") from None
    return _Request(config)


class _DynamicProfiler:
    """The job's one dynamic-profiling controller (module functions forward to it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.config_path: str | None = None
        self.stamp: tuple[int, int] | None = None
        self.step_number = 0
        self.pending: _Request | None = None
        self.session: profile | None = None
        self.steps_left = 0

    def init(self, path: str) -> None:
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise ValueError(f"dynamic_profile.init: path must be a directory path, got {path!r}")
        directory = os.fspath(path)
        if os.path.islink(directory):
            raise ValueError(f"dynamic_profile.init: {directory!r} is a symbolic link, which is not accepted")
        os.makedirs(directory, exist_ok=True)
        config_path = os.path.join(directory, CONFIG_FILE_NAME)
        with self.lock:
            if self.config_path is not None:
                warnings.warn("dynamic_profile.init was called again; the new config path replaces the old",
                              UserWarning, stacklevel=3)
            if not os.path.exists(config_path):
                with open(config_path, "w", encoding="utf-8") as file:
                    json.dump(_TEMPLATE, file, indent=4)
            self.config_path = config_path
            self.stamp = self._stamp()  # the file as it is now is not a request

    def _stamp(self) -> tuple[int, int] | None:
        try:
            status = os.stat(self.config_path)
        except OSError:
            return None
        return status.st_mtime_ns, status.st_size

    def _poll(self) -> None:
        stamp = self._stamp()
        if stamp is None or stamp == self.stamp:
            return
        self.stamp = stamp
        try:
            request = _read_request(self.config_path)
        except DynamicProfileConfigError as error:
            warnings.warn(f"dynamic_profile: {self.config_path} ignored: {error}", UserWarning, stacklevel=4)
            return
        if request.start_step > 0 and request.selects_this_rank():
            self.pending = request

    def _begin(self, request: _Request) -> None:
        if self.session is not None:
            warnings.warn("dynamic_profile: a collection is running; the new request waits for it to finish",
                          UserWarning, stacklevel=4)
            self.pending = request
            return
        if torch._C._autograd._profiler_enabled():
            # torch.profiler keeps one session per process; a second one started inside it
            # would take the running session's events (and nested stop orders crash Kineto).
            warnings.warn("dynamic_profile: the collection could not start: another profiler is running",
                          UserWarning, stacklevel=4)
            return
        try:
            session = request.new_profile()
            session.start()
        except (RuntimeError, ValueError, OSError) as error:
            # e.g. another profiler already runs in this process: report, keep training.
            warnings.warn(f"dynamic_profile: the collection could not start: {error}", UserWarning, stacklevel=4)
            return
        self.session = session
        self.steps_left = request.warmup + request.active

    def _end(self) -> None:
        session, self.session = self.session, None
        session.stop()

    def step(self) -> None:
        with self.lock:
            if self.session is not None:
                self.session.step()
                self.steps_left -= 1
                if self.steps_left == 0:
                    self._end()
            self.step_number += 1
            if self.config_path is not None:
                self._poll()
            # A collection set to start at a step already reached starts at the next one.
            if self.pending is not None and self.session is None and self.pending.start_step <= self.step_number + 1:
                request, self.pending = self.pending, None
                self._begin(request)

    def start(self, config_path: str | None) -> None:
        with self.lock:
            path = os.fspath(config_path) if config_path is not None else self.config_path
            if path is None:
                raise ValueError("dynamic_profile.start: give config_path, or call dynamic_profile.init(path) first")
            if os.path.islink(path):
                raise ValueError(f"dynamic_profile.start: {path!r} is a symbolic link, which is not accepted")
            try:
                request = _read_request(path)
            except DynamicProfileConfigError as error:
                warnings.warn(f"dynamic_profile.start: {error}; nothing is collected", UserWarning, stacklevel=3)
                return
            if request.selects_this_rank():
                self._begin(request)

    def set_state(self, state_step: dict) -> None:
        if not isinstance(state_step, dict):
            raise TypeError(f"dynamic_profile.set_state: state_step must be a dict, got {type(state_step).__name__}")
        unknown = set(state_step) - {"step"}
        if unknown:
            raise ValueError(f"dynamic_profile.set_state: unknown keys {sorted(unknown)}; the key is 'step'")
        if "step" in state_step:
            value = state_step["step"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"dynamic_profile.set_state: step must be an int >= 0, got {value!r}")
            with self.lock:
                self.step_number = value

    def shutdown(self) -> None:
        with self.lock:
            if self.session is not None:
                self._end()
            self.__init__()


_controller = _DynamicProfiler()
# A job that ends during a collection still gets the trace of the steps it recorded.
atexit.register(_controller.shutdown)


def init(path: str) -> None:
    """Start watching ``<path>/profiler_config.json`` (created from the template if absent)."""
    _controller.init(path)


def step() -> None:
    """Mark the end of one training step: advance a running collection, read a new request."""
    _controller.step()


def start(config_path: str = None) -> None:
    """Begin one collection now, configured by ``config_path`` (default: the file of ``init``)."""
    _controller.start(config_path)


def set_state(state_step: dict) -> None:
    """Set the controller's step count (``{"step": n}``), e.g. when training resumes at step
    n, so that ``start_step`` in the config file counts the job's steps."""
    _controller.set_state(state_step)
