"""Makes ``torch.autocast("cuda")`` (and ``torch.cuda.amp.autocast``) an npu autocast region.

Missing extension point: ``torch.autocast`` is a class whose constructor reads the device
type and then calls ``torch.set_autocast_enabled``/``set_autocast_dtype``/
``get_autocast_dtype`` with it; none of these is a torch function in PyTorch 2.13, so the
device mode never sees the ``"cuda"``. ``torch.cuda.amp.autocast`` subclasses it.

``apply()`` wraps ``torch.amp.autocast_mode.autocast.__init__`` (one patch site, the class
that ``torch.autocast`` and ``torch.amp.autocast`` name) so that ``device_type="cuda"`` is
read as ``"npu"``. Inside ``torch.compile`` the region is replayed through the same
constructor, so compiled graphs get npu autocast too.

Delete when autocast's device-state functions dispatch through ``__torch_function__``.
"""
from __future__ import annotations

import functools

import torch
import torch.amp.autocast_mode as autocast_mode

_original = None


def apply() -> None:
    global _original
    if _original is not None:
        return
    original = autocast_mode.autocast.__init__

    @functools.wraps(original)
    def __init__(self, device_type, *args, **kwargs):
        if device_type == "cuda":
            device_type = "npu"
        original(self, device_type, *args, **kwargs)

    _original = original
    autocast_mode.autocast.__init__ = __init__


def revert() -> None:
    global _original
    if _original is None:
        return
    autocast_mode.autocast.__init__ = _original
    _original = None


def sites() -> tuple[str, ...]:
    return ("torch.amp.autocast_mode.autocast.__init__",)
