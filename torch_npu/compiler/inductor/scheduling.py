"""The Scheduling registered for device ``npu``: picks the kernel generator per compile.

Inductor registers one Scheduling per device for the whole process, but ``npu_backend``
can differ between compiles. So the registered class is a dispatching constructor:
``NpuScheduling(scheduler)`` resolves ``npu_backend`` for the compile in progress,
validates it (an unknown name fails here, listing the valid ones, before any backend module
is imported), imports only the chosen backend and returns that backend's Scheduling
instance. It is a class, not a function, because Inductor inspects the registered
constructor with ``issubclass`` (``ir.is_triton``); npu kernels are never Triton.
"""
from __future__ import annotations

import logging
from typing import Any

import torch

from . import backend_registry, registration

log = logging.getLogger(__name__)
# TORCH_LOGS=npu_inductor: the backend each compile chose, and where the choice came from.
choice_log = torch._logging.getArtifactLogger(__name__, "npu_inductor")


class NpuScheduling:
    """Constructs the Scheduling of the npu backend chosen for the current compile."""

    def __new__(cls, scheduler: Any) -> Any:
        # Cheap when nothing changed; restores the config module and op overrides if
        # Inductor's device-module route re-registered npu with fewer arguments.
        registration.setup()
        name = backend_registry.resolve_backend_name()
        scheduling_cls = backend_registry.load_scheduling_class(name)
        if isinstance(scheduling_cls, type) and issubclass(scheduling_cls, cls):
            # Would make Python call __init__ on the result a second time.
            raise TypeError(f"npu backend {name!r}: {scheduling_cls} must not derive from {cls}")
        log.debug("npu_backend=%s -> %s", name, scheduling_cls)
        if scheduler is not None and choice_log.isEnabledFor(logging.DEBUG):  # a real compile, not a feature query
            choice_log.debug(
                "npu Inductor backend %r (%s.%s), set by %s",
                name, scheduling_cls.__module__, scheduling_cls.__qualname__, backend_registry.backend_source(),
            )
        return scheduling_cls(scheduler)
