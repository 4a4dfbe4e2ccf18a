"""Maps ``init_process_group("nccl")`` and ``new_group(backend="nccl")`` to the ``hccl`` backend.

Missing extension point: ``"nccl"`` is a built-in backend name, handled before any
registered backend is consulted (``Backend.register_backend`` refuses the name, and the
NCCL branch of process-group creation fails without NCCL), and these functions are not
torch functions, so the device mode never sees their arguments. ``hccl`` is the npu
backend torch_npu registers with ``Backend.register_backend(..., devices=["npu"])``.

``apply()`` wraps the two functions, in ``torch.distributed.distributed_c10d`` and in the
``torch.distributed`` namespace that re-exports them (four patch sites), translating the
arguments before the real function runs: ``"nccl"`` -> ``"hccl"``, ``"cuda:nccl"`` ->
``"npu:hccl"`` (also inside ``"cpu:gloo,cuda:nccl"``), and a cuda ``device_id`` -> npu.

Delete when c10d lets a device claim another backend name.
"""
from __future__ import annotations

import functools
import inspect

import torch
import torch.distributed
import torch.distributed.distributed_c10d as c10d

FUNCTIONS = ("init_process_group", "new_group")
NAMESPACES = (c10d, torch.distributed)

_originals: dict[tuple[str, str], object] = {}


def npu_backend(backend):
    """The backend string with every NCCL part given to hccl on npu."""
    if not isinstance(backend, str):
        return backend
    parts = []
    for part in backend.split(","):
        device, sep, name = part.rpartition(":")
        if name.strip().lower() == "nccl":
            name = "hccl"
            if sep and device.strip().lower() == "cuda":
                device = "npu"
        elif sep and device.strip().lower() == "cuda":
            device = "npu"
        parts.append(f"{device}{sep}{name}")
    return ",".join(parts)


def _npu_device_id(device_id):
    if isinstance(device_id, torch.device) and device_id.type == "cuda":
        return torch.device("npu", device_id.index)
    return device_id


def _wrap(function):
    signature = inspect.signature(function)

    @functools.wraps(function)
    def with_npu_backend(*args, **kwargs):
        bound = signature.bind_partial(*args, **kwargs)
        if "backend" in bound.arguments:
            bound.arguments["backend"] = npu_backend(bound.arguments["backend"])
        if "device_id" in bound.arguments:
            bound.arguments["device_id"] = _npu_device_id(bound.arguments["device_id"])
        return function(*bound.args, **bound.kwargs)

    with_npu_backend.__wrapped_by_transfer_to_npu__ = True
    return with_npu_backend


def apply() -> None:
    if _originals:
        return
    wrappers = {name: _wrap(getattr(c10d, name)) for name in FUNCTIONS}
    for namespace in NAMESPACES:
        for name in FUNCTIONS:
            _originals[(namespace.__name__, name)] = getattr(namespace, name)
            setattr(namespace, name, wrappers[name])


def revert() -> None:
    for namespace in NAMESPACES:
        for name in FUNCTIONS:
            original = _originals.pop((namespace.__name__, name), None)
            if original is not None:
                setattr(namespace, name, original)


def sites() -> tuple[str, ...]:
    return tuple(f"{namespace.__name__}.{name}" for namespace in NAMESPACES for name in FUNCTIONS)
