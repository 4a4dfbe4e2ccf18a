"""Hyper-parameter checks shared by the fused optimizers (ValueError naming the bad value)."""
from __future__ import annotations


def check_non_negative(name: str, value) -> None:
    if not 0.0 <= value:
        raise ValueError(f"Invalid {name}: {value} (must be >= 0)")


def check_betas(betas) -> None:
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"Invalid betas: {betas!r} (must be a pair of floats in [0, 1))")
    for i, b in enumerate(betas):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {b} (must be in [0, 1))")
