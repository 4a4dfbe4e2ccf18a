"""The values ``npu_backend`` may take, and how the one chosen for a compile is found.

An npu backend is a kernel code generator for Inductor: a Scheduling class constructed as
``cls(scheduler)`` (``scheduler`` may be ``None`` when Inductor only asks for backend
features). Built-in ones are named here by import path; third-party packages add their own
through the entry-point group ``ENTRY_POINT_GROUP``::

    [project.entry-points."torch_npu.inductor_backends"]
    mybackend = "my_package.scheduling:MyScheduling"

Listing the valid names reads entry-point metadata only; a backend module is imported
only once its name has been chosen and validated, so ``default`` never imports
``torch_mlir`` and an unknown name fails before any backend loads.
"""
from __future__ import annotations

import functools
import importlib
import logging
from typing import Any

from torch_npu.compiler.npu_backend_option import ENV_VAR, OPTION

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "torch_npu.inductor_backends"

# name -> "module:attribute" of the Scheduling class.
BUILTIN_BACKENDS: dict[str, str] = {
    "default": "torch_npu.compiler.inductor.default_scheduling:NpuCppScheduling",
    "mlir": "torch_npu.compiler.inductor.mlir.scheduling:MlirScheduling",
}


class UnknownNpuBackendError(ValueError):
    """``npu_backend`` names no built-in backend and no installed plugin."""


@functools.cache
def _plugin_entry_points() -> dict[str, Any]:
    """Entry points of installed plugins by name; metadata only, nothing imported.

    Cached for the process: a plugin installed after the first npu compile is seen after a
    restart (or after ``refresh_plugins()``).
    """
    from importlib.metadata import entry_points

    found: dict[str, Any] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in BUILTIN_BACKENDS:
            log.warning(
                "ignoring entry point %r of group %s: %r is a built-in npu_backend",
                ep.value,
                ENTRY_POINT_GROUP,
                ep.name,
            )
            continue
        # The first distribution on sys.path wins, as for import.
        found.setdefault(ep.name, ep)
    return found


def refresh_plugins() -> None:
    """Forget the cached plugin list (after installing a plugin in a running process)."""
    _plugin_entry_points.cache_clear()


def available_backends() -> tuple[str, ...]:
    """Every valid ``npu_backend`` value: the built-ins, then plugins, sorted."""
    return tuple(BUILTIN_BACKENDS) + tuple(sorted(_plugin_entry_points()))


def _entry() -> Any:
    """The ``npu_backend`` entry of ``torch._inductor.config``, which npu's compile setup adds."""
    from torch._inductor import config

    entry = config._config.get(OPTION)
    if entry is None:
        raise RuntimeError(
            f"torch._inductor.config has no {OPTION!r} entry: torch_npu's compile setup "
            "(the inductor_npu_backend_option patch) has not run in this process"
        )
    return entry


def requested_backend() -> object:
    """The raw ``npu_backend`` value of the compile in progress (not validated).

    Options > ``torch._inductor.config.npu_backend`` > the environment variable > default,
    all resolved by the config entry.
    """
    from torch._inductor import config

    _entry()
    return getattr(config, OPTION)


# Where a value set on the config entry came from: ``options=`` of torch.compile is applied
# by Inductor as a ``config.patch`` around ``compile_fx``, the same override an assignment
# makes, so the config cannot tell the two apart.
SET_ON_CONFIG = f"torch.compile(options=...) or torch._inductor.config.{OPTION}"


def backend_source() -> str:
    """Where the ``npu_backend`` of the compile in progress came from, for the log.

    Read from the config entry: its override (``SET_ON_CONFIG``), the environment
    variable, or the default. An override of the value the environment or the default
    gives anyway is reported as coming from there.
    """
    from torch.utils._config_module import _UNSET_SENTINEL

    entry = _entry()
    from_env = entry.env_value_default is not _UNSET_SENTINEL
    below = entry.env_value_default if from_env else entry.default
    override = entry.user_override.get()
    # A finished config.patch leaves the value it restored as an override: an override
    # equal to what env/default give is reported as coming from there.
    if override is not _UNSET_SENTINEL and override != below:
        return SET_ON_CONFIG
    return f"environment {ENV_VAR}" if from_env else "default"


def validate_backend_name(name: object) -> str:
    """Return ``name`` if it is a valid backend name, else raise with the valid ones."""
    valid = available_backends()
    if not isinstance(name, str):
        # TORCHINDUCTOR_NPU_BACKEND=1/0 is read as a bool by torch's config machinery.
        raise UnknownNpuBackendError(
            f"npu_backend must be a string naming a backend, got {name!r} "
            f"({type(name).__name__}); valid values: {', '.join(valid)}"
        )
    if name not in valid:
        raise UnknownNpuBackendError(
            f"unknown npu_backend {name!r}; valid values: {', '.join(valid)} "
            f"(set by options={{'npu_backend': ...}}, torch._inductor.config.npu_backend "
            f"or {ENV_VAR}; plugins register under the entry-point group "
            f"{ENTRY_POINT_GROUP!r})"
        )
    return name


def resolve_backend_name() -> str:
    """The validated backend name of the compile in progress."""
    return validate_backend_name(requested_backend())


def load_scheduling_class(name: str) -> type:
    """Import and return the Scheduling class of the (already validated) backend ``name``."""
    target = BUILTIN_BACKENDS.get(name)
    if target is not None:
        module_name, _, attr = target.partition(":")
        return getattr(importlib.import_module(module_name), attr)
    return _plugin_entry_points()[name].load()
