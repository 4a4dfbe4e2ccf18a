"""torch_npu.distributed: the ``hccl`` process group for npu tensors.

``import torch_npu`` registers the backend name with torch.distributed and nothing more;
this package loads when the first hccl group is created (``init_process_group("hccl")``,
``"cpu:gloo,npu:hccl"``, or no backend at all on an npu machine) or when imported. The
DTensor sharding strategies of the npu operators live in ``torch_npu.distributed.tensor``,
which loads only when imported or first accessed here.
"""
from __future__ import annotations

import importlib

from torch_npu.distributed._backend import is_hccl_available
from torch_npu.distributed._diagnostics import collective_report, collective_status

__all__ = ["ProcessGroupHCCL", "collective_report", "collective_status", "is_hccl_available"]

_LAZY_SUBMODULES = ("tensor",)


def __getattr__(name: str):
    if name == "ProcessGroupHCCL":
        from torch_npu.distributed._backend import hccl_module

        return hccl_module().ProcessGroupHCCL
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
