"""``torch.npu.set_sync_debug_mode``: report operations that make the host wait for the
device, as ``torch.cuda.set_sync_debug_mode`` does.

Modes: ``"default"``/0 (silent), ``"warn"``/1 (a warning at each synchronising call),
``"error"``/2 (a RuntimeError). Synchronising calls are the ones that wait on real
hardware: ``.item()``/``bool(t)``/printing, copies between npu and host memory,
``torch.npu.synchronize()``, stream and event synchronisation.
"""
from __future__ import annotations

import torch_npu._C as _C

__all__ = ["set_sync_debug_mode", "get_sync_debug_mode"]

_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """Set the mode: ``"default"``/0, ``"warn"``/1 or ``"error"``/2."""
    if isinstance(debug_mode, str):
        if debug_mode not in _MODES:
            raise RuntimeError('invalid value of debug_mode, expected one of "default", "warn", "error"')
        debug_mode = _MODES[debug_mode]
    if isinstance(debug_mode, bool) or not isinstance(debug_mode, int) or debug_mode not in (0, 1, 2):
        raise RuntimeError('invalid value of debug_mode, expected one of 0, 1, 2 or "default", "warn", "error"')
    _C._set_sync_debug_mode(debug_mode)


def get_sync_debug_mode() -> int:
    """The current mode as an int (0, 1 or 2)."""
    return _C._get_sync_debug_mode()
