"""torch_npu.distributed: the ``hccl`` process group for npu tensors.

``import torch_npu`` registers the backend name with torch.distributed and nothing more;
this package loads when the first hccl group is created (``init_process_group("hccl")``,
``"cpu:gloo,npu:hccl"``, or no backend at all on an npu machine) or when imported. The
DTensor sharding strategies of the npu operators live in ``torch_npu.distributed.tensor``,
which loads only when imported or first accessed here; so do the Ascend names
``fsdp``, ``pipelining``, ``rpc``, ``run``, ``distributed_c10d`` and the uneven
collectives.
"""
from __future__ import annotations

import importlib

from torch_npu.distributed._backend import is_hccl_available
from torch_npu.distributed._diagnostics import collective_report, collective_status

__all__ = [
    "ProcessGroupHCCL", "all_gather_into_tensor_uneven", "collective_report", "collective_status", "is_available",
    "is_hccl_available", "reduce_scatter_tensor_uneven", "reinit_process_group",
]

_LAZY_SUBMODULES = ("distributed_c10d", "fsdp", "pipelining", "rpc", "run", "tensor")
_LAZY_NAMES = {
    "reinit_process_group": "distributed_c10d",
    "reduce_scatter_tensor_uneven": "uneven_collectives",
    "all_gather_into_tensor_uneven": "uneven_collectives",
}


def is_available():
    """True when torch.distributed is built in (the hccl backend needs it)."""
    import torch.distributed

    return torch.distributed.is_available()


def __getattr__(name: str):
    if name == "ProcessGroupHCCL":
        from torch_npu.distributed._backend import hccl_module

        return hccl_module().ProcessGroupHCCL
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
