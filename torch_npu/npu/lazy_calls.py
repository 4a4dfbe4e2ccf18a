"""``torch.npu._lazy_call``: run a callable once the npu runtime is initialised.

Libraries written for CUDA (DeepSpeed's activation checkpointing restoring RNG states,
for one) call ``torch.<device>._lazy_call(fn)`` so that ``fn`` does not initialise the
device by itself: it runs at once if the device is up, else it is queued and runs right
after initialisation. PyTorch asks ``torch.npu._lazy_init()`` before the first npu tensor
is made (and ``torch.npu.init()`` does it on demand); both drain this queue. As with
``torch.cuda``, a queued call given ``seed=True`` or ``seed_all=True`` replaces the
previous one of its kind (only the latest seed matters), and a queued call that fails
raises ``DeferredNpuCallError`` naming where it was queued.
"""
from __future__ import annotations

import threading
import traceback
from typing import Any, Callable

import torch_npu._C as _C

__all__ = ["DeferredNpuCallError"]


class DeferredNpuCallError(Exception):
    """A callable queued by ``torch.npu._lazy_call`` failed when the device initialised."""


_initialization_lock = threading.Lock()
_queued_calls: list[tuple[Callable[[], Any], list[str]]] = []
_queued_seed_calls: dict[str, tuple[Callable[[], Any], list[str]]] = {}


def _lazy_call(callable: Callable[[], Any], **kwargs: Any) -> None:  # noqa: A002  (torch.cuda's name)
    """Call ``callable()`` now if npu is initialised, else right after it initialises."""
    if not hasattr(callable, "__call__"):
        raise TypeError(f"_lazy_call expects a callable, got {type(callable).__name__}")
    unknown = set(kwargs) - {"seed", "seed_all"}
    if unknown:
        raise TypeError(f"_lazy_call: unknown keyword(s) {sorted(unknown)}; accepted: seed, seed_all")
    with _initialization_lock:
        if not _C._is_initialized():
            stack = traceback.format_stack()
            if kwargs.get("seed_all"):
                _queued_seed_calls["seed_all"] = (callable, stack)
            elif kwargs.get("seed"):
                _queued_seed_calls["seed"] = (callable, stack)
            else:
                _queued_calls.append((callable, stack))
            return
    callable()


def _run_queued_calls() -> None:
    """Run (once) every call queued before initialisation, seeds first, as CUDA does."""
    with _initialization_lock:
        calls = [*_queued_seed_calls.values(), *_queued_calls]
        _queued_seed_calls.clear()
        _queued_calls.clear()
    for queued, stack in calls:
        try:
            queued()
        except Exception as exc:
            where = "".join(stack)
            raise DeferredNpuCallError(
                f"npu call failed lazily at initialization with error: {exc}\n\n"
                f"npu call was originally invoked at:\n\n{where}"
            ) from exc
