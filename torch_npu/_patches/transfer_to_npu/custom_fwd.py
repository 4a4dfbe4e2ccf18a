"""Makes ``torch.amp.custom_fwd(device_type="cuda", cast_inputs=...)`` cast on npu.

Missing extension point: ``custom_fwd`` keeps its ``device_type`` and, in an autocast
region, casts only the floating-point tensors whose ``device.type`` equals it; npu tensors
say ``"npu"``, so under ``torch.autocast("cuda")`` nothing was cast and the forward ran
in the inputs' dtype. ``torch.cuda.amp.custom_fwd`` calls ``torch.amp.custom_fwd`` with
``device_type="cuda"``. A decorator factory is no torch function: no mode sees it.

``apply()`` replaces ``custom_fwd`` in ``torch.amp.autocast_mode`` and ``torch.amp`` (two
patch sites) by one that reads ``"cuda"`` as ``"npu"`` when the forward is decorated; the
autocast state it then reads, the region it enters and the casts are npu's.
``custom_bwd`` needs nothing: it re-enters the state the forward recorded through
``torch.autocast``, which the ``autocast`` patch already serves.

Delete with ``autocast``.
"""
from __future__ import annotations

import functools

import torch.amp
import torch.amp.autocast_mode as autocast_mode

NAMESPACES = (autocast_mode, torch.amp)

_originals: dict[str, object] = {}


def _npu_custom_fwd(original):
    @functools.wraps(original)
    def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
        if device_type == "cuda":
            device_type = "npu"
        return original(fwd, device_type=device_type, cast_inputs=cast_inputs)

    return custom_fwd


def apply() -> None:
    if _originals:
        return
    replacement = _npu_custom_fwd(autocast_mode.custom_fwd)
    for namespace in NAMESPACES:
        _originals[namespace.__name__] = namespace.custom_fwd
        namespace.custom_fwd = replacement


def revert() -> None:
    for namespace in NAMESPACES:
        original = _originals.pop(namespace.__name__, None)
        if original is not None:
            namespace.custom_fwd = original


def sites() -> tuple[str, ...]:
    return tuple(f"{namespace.__name__}.custom_fwd" for namespace in NAMESPACES)
