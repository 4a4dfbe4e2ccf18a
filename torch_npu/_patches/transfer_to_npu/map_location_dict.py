"""Makes a ``map_location`` dict keyed by cuda locations apply to storages saved on npu.

Missing extension point: with a dict ``map_location`` (the DDP tutorial's
``{"cuda:0": f"cuda:{rank}"}``), ``torch.load`` looks each storage's saved location up in
the dict before any deserializer runs; a checkpoint saved under transfer_to_npu says
``"npu:0"``, so the lookup misses and every rank would load rank 0's device. The package
registry (``checkpoint_location``) only sees the location after the lookup.

``apply()`` wraps ``torch.serialization._get_restore_location`` (one patch site; both of
``torch.load``'s loaders call it) so that a dict gains, for each ``cuda`` key, the same
entry under the npu location of that index (the dict's own ``npu`` keys win). Any other
``map_location`` passes through unchanged.

Delete with ``cuda_module``.
"""
from __future__ import annotations

import functools

import torch.serialization as serialization

_original = None


def npu_keyed(map_location: dict) -> dict:
    """``map_location`` with each ``cuda``/``cuda:N`` key also present as ``npu``/``npu:N``."""
    extra = {}
    for key, value in map_location.items():
        if isinstance(key, str) and (key == "cuda" or key.startswith("cuda:")):
            extra["npu" + key[4:]] = value
    return {**extra, **map_location} if extra else map_location


def apply() -> None:
    global _original
    if _original is not None:
        return
    original = serialization._get_restore_location

    @functools.wraps(original)
    def _get_restore_location(map_location):
        if isinstance(map_location, dict):
            map_location = npu_keyed(map_location)
        return original(map_location)

    _original = original
    serialization._get_restore_location = _get_restore_location


def revert() -> None:
    global _original
    if _original is None:
        return
    serialization._get_restore_location = _original
    _original = None


def sites() -> tuple[str, ...]:
    return ("torch.serialization._get_restore_location",)
