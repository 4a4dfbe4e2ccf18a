"""``torch_npu.testing.common_utils``: the helpers Ascend tests import by this name.

The tensor factories, skip conditions and baselines live in their own modules
(``tensor_factories``, ``skip_conditions``, ``baseline``) and are re-exported here; the
small helpers below (random state, device choice, profiler checks, iteration) are the
rest of the names Ascend tests take from ``common_utils``.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import time
from typing import Any, Callable, Iterator

import torch

from .baseline import Baseline, dump_baseline
from .skip_conditions import SkipIfNoLapack, SkipIfNotGteCANNVersion, SkipIfNotRegistered, SupportedDevices
from .tensor_factories import create_common_tensor, create_dtype_tensor

__all__ = [
    "Baseline", "dump_baseline", "SkipIfNoLapack", "SkipIfNotGteCANNVersion", "SkipIfNotRegistered",
    "SupportedDevices", "create_common_tensor", "create_dtype_tensor", "freeze_rng_state",
    "get_cycles_per_ms", "get_npu_device", "set_npu_device", "is_iterable", "iter_indices",
    "test_2args_broadcast", "check_operators_in_prof",
]


@contextlib.contextmanager
def freeze_rng_state():
    """Run the block and put the cpu and npu random states back as they were, so that
    random draws inside it do not change what the test draws after it."""
    cpu_state = torch.get_rng_state()
    npu_states = torch.npu.get_rng_state_all() if torch.npu.is_initialized() else None
    try:
        yield
    finally:
        torch.set_rng_state(cpu_state)
        if npu_states is not None:
            torch.npu.set_rng_state_all(npu_states)


@functools.lru_cache(maxsize=1)
def get_cycles_per_ms() -> float:
    """Spin-loop iterations per millisecond of this host (npu kernels run on it), measured
    once: the unit of ``torch.npu._sleep``-style delays in stream tests."""
    rates = []
    for _ in range(3):
        iterations = 200_000
        start = time.perf_counter()
        counter = 0
        for _ in range(iterations):
            counter += 1
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        rates.append(iterations / max(elapsed_ms, 1e-6))
    return sorted(rates)[1]


def get_npu_device():
    """The ``torch.device`` tests run on: the current npu device."""
    return torch.device("npu", torch.npu.current_device())


def set_npu_device():
    """Select the npu device the tests run on (``TORCH_NPU_TEST_DEVICE`` names its index,
    default 0) and return it."""
    import os

    raw = os.environ.get("TORCH_NPU_TEST_DEVICE", "0")
    try:
        index = int(raw)
    except ValueError:
        raise ValueError(f"TORCH_NPU_TEST_DEVICE must be a device index, got {raw!r}") from None
    torch.npu.set_device(index)
    return torch.device("npu", index)


def is_iterable(obj) -> bool:
    """Whether ``iter(obj)`` works."""
    try:
        iter(obj)
    except TypeError:
        return False
    return True


def iter_indices(tensor) -> Iterator:
    """Every index of ``tensor``: ints for a 1-d tensor, tuples otherwise (nothing for 0-d)."""
    if tensor.dim() == 0:
        return iter(range(0))
    if tensor.dim() == 1:
        return iter(range(tensor.size(0)))
    return itertools.product(*(range(s) for s in tensor.size()))


def test_2args_broadcast(fn) -> Callable:
    """A test of a two-argument operator ``fn``: on npu, broadcasting the second argument
    must give the result of expanding it first, and both must equal the cpu result."""

    def check(self) -> None:
        for shape, other_shape in (((4, 3), (3,)), ((2, 1, 5), (4, 1)), ((3,), ())):
            x = torch.randn(shape)
            y = torch.randn(other_shape)
            expected = fn(x, y)
            broadcast = fn(x.npu(), y.npu())
            expanded = fn(x.npu(), y.expand(torch.broadcast_shapes(shape, other_shape)).contiguous().npu())
            self.assertRtolEqual(expected, broadcast.cpu())
            self.assertRtolEqual(expected, expanded.cpu())

    check.__name__ = f"test_{getattr(fn, '__name__', 'op')}_broadcast"
    return check


test_2args_broadcast.__test__ = False  # a factory of tests, not a test: pytest must not collect it


def _event_names(prof: Any) -> set[str]:
    names = set()
    for event in prof.events():
        names.add(event.name)
        names.add(event.name.split("::")[-1])
    return names


def check_operators_in_prof(expected_operators, prof, unexpected_operators=None) -> bool:
    """Whether the profile ``prof`` (a finished ``torch.profiler.profile`` or
    ``torch_npu.profiler.profile``) ran every operator of ``expected_operators`` and none
    of ``unexpected_operators``; names match whole (``aten::add``) or by their last part
    (``add``, ``npu_rms_norm``)."""
    if isinstance(expected_operators, str) or isinstance(unexpected_operators, str):
        raise TypeError("check_operators_in_prof takes lists of operator names, not a single string")
    names = _event_names(prof)
    if any(op not in names for op in expected_operators):
        return False
    return not any(op in names for op in (unexpected_operators or ()))
