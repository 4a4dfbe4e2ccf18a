"""Loads checkpoint storages tagged or mapped to ``"cuda"`` onto npu: a registration, no patch.

``torch.load`` restores every storage through ``torch.serialization``'s package registry,
whatever ``map_location`` is: ``"cuda"``, ``"cuda:1"`` and ``torch.device("cuda")`` name
the location directly, a dict maps a saved location to one, and a callable that returns
``None`` falls back to the saved location (a checkpoint written on a GPU says ``"cuda:0"``).
The registry is PyTorch's documented extension point for this
(``torch.serialization.register_package``, where a lower priority runs first), so
``install()`` registers a deserializer ahead of CUDA's that restores a ``cuda`` location as
the npu device of the same index, and ``uninstall()`` takes it out again. It tags nothing:
what is saved keeps npu's own location tags. A callable that moves storages itself
(``storage.cuda(rank)``) is served by the ``storage_to`` patch.
"""
from __future__ import annotations

import torch
import torch.serialization as serialization

# Ahead of CUDA's deserializer (20), behind cpu's (10).
PRIORITY = 19


def _no_tag(storage):
    return None


def restore_cuda_location(storage, location: str):
    """The storage restored on npu when ``location`` is a cuda one, else ``None`` (not ours)."""
    if location == "cuda" or location.startswith("cuda:"):
        return serialization.default_restore_location(storage, "npu" + location[4:])
    return None


_entry = (PRIORITY, _no_tag, restore_cuda_location)


def install() -> None:
    if _entry not in serialization._package_registry:
        serialization.register_package(*_entry)


def uninstall() -> None:
    while _entry in serialization._package_registry:
        serialization._package_registry.remove(_entry)


def installed() -> bool:
    return _entry in serialization._package_registry
