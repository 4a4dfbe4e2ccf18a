"""FlopsCounter: FLOPs of the matmul, convolution and attention work run while counting is on.

Ascend counts the FLOPs of its cube kernels (MM, BMM, the matmul+collective fusions, flash
attention) in two totals: "traversed" (all work, recomputation included: hardware
utilisation) and "recorded" (work outside ``pause()``/``resume()``, i.e. without
activation recomputation: model utilisation). Here a dispatch mode sees every aten call
of the thread that called ``start()`` (and of the autograd work it starts) and prices it
with the formulas of ``torch.utils.flop_counter`` (the numbers ``FlopCounterMode`` gives);
ops without a formula cost nothing. The counter is one shared state, as Ascend's is a
singleton: every ``FlopsCounter()`` controls the same counts.
"""
from __future__ import annotations

import threading

import torch

__all__ = ["FlopsCounter"]


class _CountingState:
    def __init__(self):
        self.lock = threading.Lock()
        self.enabled = False
        self.paused = False
        self.recorded = 0
        self.traversed = 0
        self.mode = None  # the dispatch mode while counting


_STATE = _CountingState()


def _make_mode():
    # Built on first start(): torch.utils.flop_counter and the dispatch-mode machinery are
    # not needed by ``import torch_npu``.
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class _FlopsCountingMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = flop_registry.get(getattr(func, "_overloadpacket", None))
            if formula is not None:
                flops = int(formula(*args, **kwargs, out_val=out))
                with _STATE.lock:
                    _STATE.traversed += flops
                    if not _STATE.paused:
                        _STATE.recorded += flops
            return out

    return _FlopsCountingMode()


class FlopsCounter:
    """Start/stop/pause/resume FLOP counting; ``get_flops()`` is ``[recorded, traversed]``."""

    def start(self):
        """Turns counting on (recorded and traversed both count until ``pause``)."""
        with _STATE.lock:
            if _STATE.enabled:
                return
            _STATE.enabled = True
            _STATE.mode = _make_mode()
        _STATE.mode.__enter__()

    def stop(self):
        """Turns counting off and resets both totals to 0 (and clears ``pause``)."""
        mode = _STATE.mode
        with _STATE.lock:
            _STATE.enabled = False
            _STATE.paused = False
            _STATE.recorded = 0
            _STATE.traversed = 0
            _STATE.mode = None
        if mode is not None:
            mode.__exit__(None, None, None)

    def pause(self):
        """Stops adding to the recorded total (recomputation follows); traversed still counts."""
        with _STATE.lock:
            _STATE.paused = True

    def resume(self):
        """Adds to the recorded total again."""
        with _STATE.lock:
            _STATE.paused = False

    def get_flops(self):
        """``[recorded, traversed]``: FLOPs without and with the work run while paused."""
        with _STATE.lock:
            return [_STATE.recorded, _STATE.traversed]

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
