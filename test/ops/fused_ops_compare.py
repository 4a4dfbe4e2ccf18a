"""Comparison of npu results with float64 cpu references of the documented formulas.

Each fused operator computes in float32 and rounds once to its output dtype, so the
tolerance depends only on that dtype.
"""
from __future__ import annotations

import torch

DTYPES = (torch.float32, torch.float16, torch.bfloat16)

TOLERANCE = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> None:
    """``actual`` (any device) equals the cpu ``expected`` within ``dtype``'s tolerance."""
    atol, rtol = TOLERANCE[dtype]
    torch.testing.assert_close(
        actual.detach().cpu().double(),
        expected.detach().cpu().double(),
        atol=atol * scale,
        rtol=rtol * scale,
    )


def npu_leaf(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The same values, in ``dtype``, on npu, as a leaf that requires grad."""
    return t.to(dtype).to("npu").detach().requires_grad_(True)


def cpu_leaf(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The values ``npu_leaf`` rounds to, in float64 on cpu, as a leaf that requires grad."""
    return t.to(dtype).double().detach().requires_grad_(True)
