"""Makes ``dist.is_nccl_available()`` true: the ``"nccl"`` a script then picks runs on hccl.

Missing extension point: ``is_nccl_available`` asks whether PyTorch was built with NCCL, and
scripts choose their backend by it (``"nccl" if dist.is_nccl_available() else "gloo"``);
with transfer_to_npu ``"nccl"`` means hccl (``process_group``), so the honest answer is that
it is available, while Gloo would refuse npu tensors. It is a plain function, seen by no
mode. ``is_backend_available("nccl")`` reads the same function.

``apply()`` replaces it in ``torch.distributed.distributed_c10d`` and in the
``torch.distributed`` namespace that re-exports it (two patch sites).

Delete with ``process_group``.
"""
from __future__ import annotations

import torch.distributed
import torch.distributed.distributed_c10d as c10d

NAMESPACES = (c10d, torch.distributed)

_originals: dict[str, object] = {}


def is_nccl_available() -> bool:
    """True: under transfer_to_npu, ``"nccl"`` is the npu's hccl backend."""
    return c10d.is_backend_available("hccl")


def apply() -> None:
    if _originals:
        return
    for namespace in NAMESPACES:
        _originals[namespace.__name__] = namespace.is_nccl_available
        namespace.is_nccl_available = is_nccl_available


def revert() -> None:
    for namespace in NAMESPACES:
        original = _originals.pop(namespace.__name__, None)
        if original is not None:
            namespace.is_nccl_available = original


def sites() -> tuple[str, ...]:
    return tuple(f"{namespace.__name__}.is_nccl_available" for namespace in NAMESPACES)
