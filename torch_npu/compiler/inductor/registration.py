"""Registers the npu device with Inductor's codegen, through Inductor's own tables, and
defines the Scheduling constructor that registration names.

``setup()`` calls ``register_backend_for_device("npu", ...)`` with the dispatching
Scheduling, the wrappers and the npu config module (``device_custom_config``, saved into
every FX-graph cache key), and ``register_device_op_overrides("npu", ...)``. It imports no
backend module and never touches the device. A failure raises: it is a failed setup step,
which the compile trigger reports and retries at the next compile.

When: as a setup step, after ``torch._inductor.compile_fx`` is imported (i.e. when an
Inductor compile is about to start) and before Inductor's first
``init_backend_registration()``. This is the only route. Inductor's other one, asking the
device module for ``Scheduling``/``PythonWrapperCodegen``/... when no codegen is registered,
would drop the config module and op overrides; ``torch.npu`` does not answer those names,
so that route finds nothing and registers nothing.

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
import threading
from typing import Any

import torch

from . import backend_registry

log = logging.getLogger(__name__)
# TORCH_LOGS=npu_inductor: the backend each compile chose, and where the choice came from.
choice_log = torch._logging.getArtifactLogger(__name__, "npu_inductor")

DEVICE_TYPE = "npu"

_lock = threading.Lock()


class NpuScheduling:
    """Constructs the Scheduling of the npu backend chosen for the current compile."""

    def __new__(cls, scheduler: Any) -> Any:
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


def is_registered() -> bool:
    """True when npu's codegen, config module and op overrides are all ours."""
    from torch._inductor.codegen import common

    from . import config as npu_config
    from .device_op_overrides import NpuDeviceOpOverrides

    return (
        common.get_scheduling_for_device(DEVICE_TYPE) is NpuScheduling
        and common.get_custom_backend_config_for_device(DEVICE_TYPE) is npu_config
        and isinstance(common.device_op_overrides_dict.get(DEVICE_TYPE), NpuDeviceOpOverrides)
    )


def _register() -> None:
    from torch._inductor.codegen import common
    from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen

    from . import config as npu_config
    from .device_op_overrides import NpuDeviceOpOverrides
    from .host_lowering_choices import HostLoweringChoices
    from .wrapper_codegen import NpuCppWrapperCodegen, NpuPythonWrapperCodegen

    common.register_backend_for_device(
        DEVICE_TYPE,
        NpuScheduling,
        NpuPythonWrapperCodegen,
        NpuCppWrapperCodegen,
        WrapperFxCodegen,
        # cpu's lowering choices for npu graphs (see host_lowering_choices).
        device_custom_pass=HostLoweringChoices(),
        device_custom_config=npu_config,
    )
    common.register_device_op_overrides(DEVICE_TYPE, NpuDeviceOpOverrides())


def setup() -> None:
    """Register npu with Inductor unless already done."""
    if is_registered():
        return
    with _lock:
        if not is_registered():
            _register()
            log.debug("registered npu codegen with Inductor")
