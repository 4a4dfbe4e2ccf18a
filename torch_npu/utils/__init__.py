"""torch_npu.utils: the helpers of Ascend's ``torch_npu.utils``, one module per concern.

Tensor combination (``combine_tensors``), the simulated CANN version (``torch_npu.npu.cann_version``),
asynchronous checkpoints (``serialization``), thread-to-core binding (``affinity``) and
matmul/conv FLOP counting (``flops_count``) are bound here; ``collect_env``,
``cpp_extension``, ``syncbatchnorm`` and ``profiler`` load when first accessed. The
package itself loads only when imported or first accessed as ``torch_npu.utils``.
"""
from __future__ import annotations

import importlib

from torch_npu.npu.cann_version import get_cann_version
from torch_npu.utils.affinity import reset_thread_affinity, set_thread_affinity
from torch_npu.utils.combine_tensors import get_part_combined_tensor, is_combined_tensor_valid, npu_combine_tensors
from torch_npu.utils.flops_count import FlopsCounter
from torch_npu.utils.serialization import save_async

__all__ = [
    "FlopsCounter", "get_cann_version", "get_part_combined_tensor", "is_combined_tensor_valid", "npu_combine_tensors",
    "reset_thread_affinity", "save_async", "set_thread_affinity",
]

_LAZY_SUBMODULES = ("collect_env", "cpp_extension", "profiler", "syncbatchnorm")


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
