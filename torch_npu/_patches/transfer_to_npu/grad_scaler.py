"""Makes ``torch.amp.GradScaler("cuda")`` (and ``torch.cuda.amp.GradScaler``) scale on npu.

Missing extension point: the scaler keeps its device as a string and, for ``"cuda"``, asks
``torch.cuda``'s availability from PyTorch's own code (``torch.cuda.amp.common``), which
transfer_to_npu leaves as the real CUDA runtime (see ``cuda_module``); a constructor is no
torch function, so the device mode does not see it either. Without this the scaler would
disable itself with a warning.

``apply()`` wraps ``torch.amp.grad_scaler.GradScaler.__init__`` (one patch site; the class
``torch.amp.GradScaler`` names and ``torch.cuda.amp.GradScaler`` subclasses) so that
``device="cuda"`` is read as ``"npu"``.

Delete with ``cuda_module``.
"""
from __future__ import annotations

import functools

import torch.amp.grad_scaler as grad_scaler

_original = None


def apply() -> None:
    global _original
    if _original is not None:
        return
    original = grad_scaler.GradScaler.__init__

    @functools.wraps(original)
    def __init__(self, device="cuda", *args, **kwargs):
        if device == "cuda":
            device = "npu"
        original(self, device, *args, **kwargs)

    _original = original
    grad_scaler.GradScaler.__init__ = __init__


def revert() -> None:
    global _original
    if _original is None:
        return
    grad_scaler.GradScaler.__init__ = _original
    _original = None


def sites() -> tuple[str, ...]:
    return ("torch.amp.grad_scaler.GradScaler.__init__",)
