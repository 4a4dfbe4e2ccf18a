"""``torch.npu.amp.grad_scaler``: the loss scaler of npu mixed-precision training.

``GradScaler`` is ``torch.amp.GradScaler`` bound to npu, with Ascend's ``dynamic``
switch: ``dynamic=True`` (the default) grows and backs off the scale as CUDA's scaler
does; ``dynamic=False`` keeps a static scale (``init_scale``), still skipping steps whose
gradients are not finite, changed only by ``update(new_scale)``. The overflow-flag
helpers answer for the simulator, which computes in IEEE mode (an overflow is an inf
that the scaler sees in the gradients, never a hidden saturation flag).
"""
from __future__ import annotations

import torch

from .autocast_mode import DEVICE_TYPE

__all__ = ["GradScaler"]


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("npu", ...)`` with a static-scale mode (``dynamic=False``)."""

    def __init__(
        self,
        init_scale=2.0**16,
        growth_factor=2.0,
        backoff_factor=0.5,
        growth_interval=2000,
        dynamic=True,
        enabled=True,
    ) -> None:
        if not isinstance(dynamic, bool):
            raise TypeError(f"dynamic must be a bool, got {type(dynamic).__name__}")
        super().__init__(
            DEVICE_TYPE,
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )
        self._dynamic = dynamic

    def update(self, new_scale=None) -> None:
        """Adjust the scale after a step: as ``torch.amp.GradScaler`` when dynamic; with a
        static scale only ``new_scale`` changes it (the per-step state is still reset)."""
        if self._dynamic or new_scale is not None or not self._enabled:
            super().update(new_scale)
            return
        if self._scale is None:
            return
        super().update(self._scale.detach().clone())

    def state_dict(self):
        """``torch.amp.GradScaler.state_dict`` plus the ``dynamic`` switch."""
        state = super().state_dict()
        if state:
            state["dynamic"] = self._dynamic
        return state

    def load_state_dict(self, state_dict) -> None:
        """Load what ``state_dict`` saved (``dynamic`` included, when present)."""
        state = dict(state_dict)
        dynamic = state.pop("dynamic", None)
        super().load_state_dict(state)
        if dynamic is not None:
            self._dynamic = bool(dynamic)

    @staticmethod
    def get_npu_overflow_flag():
        """Whether the card's saturation-mode overflow flag is set: never on the simulator
        (IEEE mode: overflows are infs in the values)."""
        return False

    @staticmethod
    def clear_npu_overflow_flag():
        """Clear the overflow flag (never set on the simulator)."""
