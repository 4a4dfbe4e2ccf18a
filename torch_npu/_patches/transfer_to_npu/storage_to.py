"""Makes ``storage.cuda()`` and ``storage.to("cuda")`` move a storage to npu: one patch site.

Missing extension point: storages are not dispatched by device (``UntypedStorage.to`` is
Python that enters ``torch.cuda.device`` from PyTorch's own module, which transfer_to_npu
leaves as the real CUDA runtime, see ``callers``), and no mode sees storage methods. Scripts
reach it through ``torch.load(f, map_location=lambda storage, loc: storage.cuda(rank))``,
the pattern of many checkpoint loaders.

``apply()`` wraps ``torch.storage._StorageBase.to`` (the method ``UntypedStorage`` inherits;
``_StorageBase.cuda`` and ``TypedStorage.to``/``.cuda`` all end in it) so that a cuda
device is read as the npu device of the same index.

Delete with ``cuda_module``.
"""
from __future__ import annotations

import functools

import torch.storage

from .device_mode import _as_npu

_original = None


def apply() -> None:
    global _original
    if _original is not None:
        return
    original = torch.storage._StorageBase.to

    @functools.wraps(original)
    def to(self, *, device, non_blocking=False):
        return original(self, device=_as_npu(device), non_blocking=non_blocking)

    _original = original
    torch.storage._StorageBase.to = to


def revert() -> None:
    global _original
    if _original is None:
        return
    torch.storage._StorageBase.to = _original
    _original = None


def sites() -> tuple[str, ...]:
    return ("torch.storage._StorageBase.to",)
