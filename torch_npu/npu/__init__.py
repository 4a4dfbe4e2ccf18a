"""The ``npu`` device module, registered as ``torch.npu``.

It gives the simulated NPU runtime (``torch_npu._C``) the Python surface PyTorch expects
of an accelerator's device module, modelled on ``torch.cuda``: devices, streams and
events, memory statistics, random state and mixed precision, one submodule per concern.

Importing it is cheap and never initializes the device: the runtime initializes on first
real use (tensor creation, ``init()``). Graph capture lives in ``graphs`` and the
step marker of graph trees in ``_graph_step_state``; both are loaded only when one of
their names is first used.
"""
from __future__ import annotations

import importlib
from typing import Any

from . import _utils, amp
from .lazy_calls import _lazy_call
from .amp import (
    get_amp_supported_dtype,
    get_autocast_dtype,
    is_autocast_enabled,
    is_bf16_supported,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .devices import (
    _DeviceGuard,
    _exchange_device,
    _is_in_bad_fork,
    _lazy_init,
    current_device,
    device,
    device_count,
    device_of,
    init,
    is_available,
    is_initialized,
    set_device,
    can_device_access_peer,
    synchronize,
)
from . import ascend_options, deterministic, external_streams, graph_task_update, hardware_only, legacy_types, memory, sync_debug
from .ascend_options import *  # noqa: F403  (start-up options with no effect on a simulator)
from .deterministic import *  # noqa: F403
from .external_streams import *  # noqa: F403
from .graph_task_update import *  # noqa: F403  (task updates of captured graphs)
from .hardware_only import *  # noqa: F403  (names that need a physical card)
from .legacy_types import *  # noqa: F403  (torch.npu.FloatTensor, torch.npu.FloatStorage, ...)
from .memory import *  # noqa: F403
from .memory import _empty_strided
from .compiled_convolution import _convolution_host_layout
from .mstx import mstx
from .sync_debug import get_sync_debug_mode, set_sync_debug_mode
from .properties import (
    NpuDeviceProperties,
    get_arch_list,
    get_device_capability,
    get_device_model_names,
    get_device_name,
    get_device_properties,
)
from .random import (
    _get_generator,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import (
    Event,
    Stream,
    StreamContext,
    _launch_host_kernel,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

# Names served by modules that load on first use: name -> submodule.
_LAZY_NAMES = {
    "NPUGraph": "graphs",
    "graph": "graphs",
    "graph_pool_handle": "graphs",
    "is_current_stream_capturing": "graphs",
    "make_graphed_callables": "graphs",
    "mark_step_begin": "_graph_step_state",
    "npurt": "npurt",
}


# Submodules Ascend code reaches as attributes (``torch_npu.npu.utils.get_cann_version()``),
# imported on first access.
_LAZY_SUBMODULES = frozenset({"utils", "npu_config", "autocast_utils", "aclnn", "cann_version", "overflow",
                              "npugraph_ex"})


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name == "graphs":  # torch.npu.graphs.capture_report, as torch.cuda.graphs is reachable
        return importlib.import_module(f"{__name__}.graphs")
    if name == "_initialized":
        # torch.utils.checkpoint reads device_module._initialized (torch.cuda's flag) to decide
        # whether to save and restore the device RNG around a recomputation.
        return is_initialized()
    submodule = _LAZY_NAMES.get(name)
    if submodule is not None:
        try:
            module = importlib.import_module(f"{__name__}.{submodule}")
            value = module if submodule == name else getattr(module, name)
        except (ImportError, AttributeError) as exc:
            # An AttributeError keeps hasattr() and getattr(..., default) working.
            raise AttributeError(f"torch.npu.{name} is unavailable: {exc}") from exc
        globals()[name] = value
        return value
    if name == "_sanitizer":
        # torch.npu._sanitizer, as torch.cuda._sanitizer: loaded on first use.
        return importlib.import_module(f"{__name__}._sanitizer")
    if name == "default_generators":
        # One generator per device, owned by the runtime; built on first access so
        # importing this module does not touch the runtime.
        from .random import _all_default_generators

        return _all_default_generators()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_NAMES) | _LAZY_SUBMODULES | {"default_generators"})


__all__ = [
    *devices.__all__,
    *properties.__all__,
    *streams.__all__,
    *memory.__all__,
    *ascend_options.__all__,
    *deterministic.__all__,
    *external_streams.__all__,
    *graph_task_update.__all__,
    *hardware_only.__all__,
    *legacy_types.__all__,
    *sync_debug.__all__,
    "mstx",
    "memory",
    *random.__all__,
    "default_generators",
    "amp",
    "get_amp_supported_dtype",
    "is_bf16_supported",
    "is_autocast_enabled",
    "set_autocast_enabled",
    "get_autocast_dtype",
    "set_autocast_dtype",
    # graphs (loaded on first use)
    *_LAZY_NAMES,
]
