"""``torch_npu.npu.utils``: the module path under which Ascend code imports device helpers.

Ascend scripts write ``from torch_npu.npu.utils import get_cann_version`` (or
``set_device``, ``npu_check_overflow``, ...). Each name is implemented in the module of
its concern (``devices``, ``streams``, ``hardware_only``, ``overflow``, ``cann_version``,
...); this module only gathers them under that path, so there is one implementation.
"""
from __future__ import annotations

from .ascend_options import set_op_timeout_ms
from .cann_version import _is_gte_cann_version, get_cann_version
from .devices import current_device, device, device_of, set_device, synchronize
from .amp import is_bf16_supported
from .hardware_only import (
    check_uce_in_memory,
    clear_npu_overflow_flag,
    current_blas_handle,
    finalize_dump,
    get_npu_overflow_flag,
    init_dump,
    obfuscation_calculate,
    obfuscation_finalize,
    obfuscation_initialize,
    set_dump,
    stress_detect,
)
from .memory import ipc_collect
from .overflow import is_support_inf_nan, npu_check_overflow
from .streams import StreamContext, current_stream, default_stream, set_stream, stream
from .sync_debug import get_sync_debug_mode, set_sync_debug_mode

__all__ = [
    "get_cann_version", "set_op_timeout_ms", "current_device", "device", "device_of", "set_device",
    "synchronize", "is_bf16_supported", "check_uce_in_memory", "clear_npu_overflow_flag",
    "current_blas_handle", "finalize_dump", "get_npu_overflow_flag", "init_dump", "obfuscation_calculate",
    "obfuscation_finalize", "obfuscation_initialize", "set_dump", "stress_detect", "ipc_collect",
    "is_support_inf_nan", "npu_check_overflow", "StreamContext", "current_stream", "default_stream",
    "set_stream", "stream", "get_sync_debug_mode", "set_sync_debug_mode",
]
