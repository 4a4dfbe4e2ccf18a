"""``torch.npu.amp.common``: whether mixed precision on npu can be used at all."""
from __future__ import annotations

__all__ = ["amp_definitely_not_available"]


def amp_definitely_not_available() -> bool:
    """True when no npu device is available, so autocast and the scaler have nothing to
    run on (as ``torch.cuda.amp.common.amp_definitely_not_available``)."""
    import torch

    return not torch.npu.is_available()
