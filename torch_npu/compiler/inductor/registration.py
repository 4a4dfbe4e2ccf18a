"""Registers the npu device with Inductor's codegen, through Inductor's own tables.

``setup()`` calls ``register_backend_for_device("npu", ...)`` with the dispatching
Scheduling, the wrappers and the npu config module (``device_custom_config``, saved into
every FX-graph cache key), and ``register_device_op_overrides("npu", ...)``. It imports no
backend module, never touches the device and never raises: a failure is logged, and npu
compiles then report that npu has no codegen, while cpu compiles are unaffected.

When: after ``torch._inductor.compile_fx`` is imported (i.e. when an Inductor compile is
about to start) and before Inductor's first ``init_backend_registration()``. Inductor's
other route, asking the device module for ``Scheduling``/``PythonWrapperCodegen``/
``CppWrapperCodegen``/``WrapperFxCodegen``, passes only those four (the config module would
be dropped) and happens once per process; ``codegen_classes`` answers it and calls
``setup()`` as well, and ``NpuScheduling`` calls it on every compile, which repairs the
registration if that route overwrote it.
"""
from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)

DEVICE_TYPE = "npu"

_lock = threading.Lock()


def is_registered() -> bool:
    """True when npu's codegen, config module and op overrides are all ours."""
    from torch._inductor.codegen import common

    from . import config as npu_config
    from .device_op_overrides import NpuDeviceOpOverrides
    from .scheduling import NpuScheduling

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
    from .scheduling import NpuScheduling
    from .wrapper_codegen import NpuCppWrapperCodegen, NpuPythonWrapperCodegen

    common.register_backend_for_device(
        DEVICE_TYPE,
        NpuScheduling,
        NpuPythonWrapperCodegen,
        NpuCppWrapperCodegen,
        WrapperFxCodegen,
        device_custom_config=npu_config,
    )
    common.register_device_op_overrides(DEVICE_TYPE, NpuDeviceOpOverrides())


def setup() -> bool:
    """Register npu with Inductor unless already done; True when npu is registered."""
    try:
        if is_registered():
            return True
        with _lock:
            if not is_registered():
                _register()
                log.debug("registered npu codegen with Inductor")
        return True
    except Exception:
        log.warning(
            "could not register the npu device with Inductor; npu graphs cannot be "
            "compiled by Inductor",
            exc_info=True,
        )
        return False
