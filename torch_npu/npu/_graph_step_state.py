"""The iteration marker shared by user code and the NPU graph trees.

``mark_step_begin()`` tells the graph trees that a new training or inference iteration
starts, so work still pending from the previous iteration (forwards whose backward never
ran) no longer holds graph memory. It lives apart from the trees so that calling it from
a training loop imports no compiler module: the trees read ``current_step()`` when they
run.
"""
from __future__ import annotations

import itertools

__all__ = ["mark_step_begin", "current_step"]

# A counter rather than a flag: the trees compare the step a graph last ran in with the
# current one, and several trees (one per device) read it independently.
_counter = itertools.count(1)
_step = 0


def mark_step_begin() -> None:
    """Indicate that a new iteration of inference or training is about to begin."""
    global _step
    _step = next(_counter)


def current_step() -> int:
    """The number of ``mark_step_begin()`` calls so far in this process (0 before any)."""
    return _step


def _reset() -> None:
    # Used by the graph trees' reset(): a fresh tree starts at step 0 again.
    global _counter, _step
    _counter = itertools.count(1)
    _step = 0
