"""Lets autograd's npu device threads finish before the interpreter shuts down.

Backward passes on npu tensors run on autograd's per-device threads. Since PyTorch 2.13,
every backward stashes a Python object (a ``contextvars`` copy) in the task's thread-local
state; the device thread drops that task, and with it the object, just after waking the
caller. If the program exits in that window, the device thread takes the GIL of a
finalizing interpreter and the process aborts ("terminate called without an active
exception"). At exit this module queues one tiny backward, carrying no Python object, on
each initialised device and waits for it: queues are served in order, so once it is done
every earlier task has been released. The barrier's own tensors stay referenced from
Python, so its task holds no last reference to a Python object either.
"""
from __future__ import annotations

import atexit
import time

import torch

import torch_npu._C as _C

_registered = False
_RELEASE_GRACE_SECONDS = 0.02
# Tensors of the barrier backward, kept alive until the interpreter clears this module.
_barrier_tensors: list[torch.Tensor] = []


def _drain_device_threads() -> None:
    if not _C._is_initialized():
        return
    engine = torch.autograd.Variable._execution_engine
    for index in range(_C._device_count()):
        try:
            leaf = torch.zeros((), device=f"npu:{index}", requires_grad=True)
            out = leaf.sum()
            seed = torch.ones((), device=f"npu:{index}")
            # The engine directly, not torch.autograd.backward: no Python object in the task.
            grads = engine.run_backward((out,), (seed,), False, False, (leaf,), True, False)
            _barrier_tensors.extend((leaf, out, seed, *grads))
        except Exception:  # exiting anyway: never turn a clean exit into a failure
            return
    # The device thread drops the barrier's task just after waking us; give it that moment.
    time.sleep(_RELEASE_GRACE_SECONDS)


def register() -> None:
    global _registered
    if not _registered:
        atexit.register(_drain_device_threads)
        _registered = True
