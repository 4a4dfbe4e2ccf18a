"""Random number generation state of the npu devices.

Every device has one default ``torch.Generator``, owned by the runtime; these functions
seed it and save or restore its state in the shape of ``torch.cuda.random``. The
generators also support graph-safe state (``graphsafe_get_state`` and friends), which
``_get_generator`` exposes for ``register_graphsafe_rng_device_type("npu")``.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

import torch_npu._C as _C

from ._utils import _get_device_index
from .devices import device_count

__all__ = [
    "get_rng_state",
    "get_rng_state_all",
    "set_rng_state",
    "set_rng_state_all",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "initial_seed",
]


def _generator(device: Any = None) -> torch.Generator:
    return _C._get_default_generator(_get_device_index(device, optional=True))


def _get_generator(device: torch.device) -> torch.Generator:
    """Default generator of ``device`` (its current device when it has no index)."""
    return _generator(device)


def _all_default_generators() -> tuple[torch.Generator, ...]:
    return tuple(_C._get_default_generator(i) for i in range(device_count()))


def get_rng_state(device: Any = "npu") -> torch.Tensor:
    """RNG state of ``device`` as a CPU ``ByteTensor``."""
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    """RNG states of all devices."""
    return [gen.get_state() for gen in _all_default_generators()]


def set_rng_state(new_state: torch.Tensor, device: Any = "npu") -> None:
    """Restore the RNG state of ``device`` from ``new_state``."""
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        raise TypeError("set_rng_state expects a torch.ByteTensor as returned by get_rng_state")
    _generator(device).set_state(new_state.clone(memory_format=torch.contiguous_format))


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    """Restore the RNG state of every device, one state per device index."""
    states = list(new_states)
    if len(states) != device_count():
        raise ValueError(f"set_rng_state_all expects {device_count()} states, one per npu device, got {len(states)}")
    for index, state in enumerate(states):
        set_rng_state(state, index)


def manual_seed(seed: int) -> None:
    """Seed the generator of the current device."""
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed the generators of all devices."""
    seed = int(seed)
    for gen in _all_default_generators():
        gen.manual_seed(seed)


def seed() -> None:
    """Seed the generator of the current device with a random number."""
    _generator().seed()


def seed_all() -> None:
    """Seed every device with one random number drawn for the current device."""
    random_seed = _generator().seed()
    for gen in _all_default_generators():
        gen.manual_seed(random_seed)


def initial_seed() -> int:
    """The seed the current device's generator started from."""
    return _generator().initial_seed()
