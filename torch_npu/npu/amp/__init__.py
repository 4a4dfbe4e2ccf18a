"""Automatic mixed precision for npu (``torch.npu.amp``): autocast and the gradient scaler.

One module per concern, under the names Ascend code imports: ``autocast_mode``
(``autocast``, ``custom_fwd``/``custom_bwd`` and the thread's autocast state),
``grad_scaler`` (``GradScaler``) and ``common`` (``amp_definitely_not_available``).
"""
from __future__ import annotations

from .autocast_mode import (
    DEVICE_TYPE,
    autocast,
    custom_bwd,
    custom_fwd,
    get_amp_supported_dtype,
    get_autocast_dtype,
    is_autocast_enabled,
    is_bf16_supported,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .common import amp_definitely_not_available
from .grad_scaler import GradScaler

__all__ = [
    "autocast",
    "GradScaler",
    "get_amp_supported_dtype",
    "is_bf16_supported",
    "custom_fwd",
    "custom_bwd",
    "is_autocast_enabled",
    "set_autocast_enabled",
    "get_autocast_dtype",
    "set_autocast_dtype",
    "amp_definitely_not_available",
]
