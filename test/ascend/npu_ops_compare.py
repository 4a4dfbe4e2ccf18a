"""Comparison helpers for the Ascend top-level operator tests: an npu result against a float64
cpu reference of the documented formula, with a tolerance set by the op's output dtype, and
``torch.library.opcheck`` run the way it can run on npu tensors."""
from __future__ import annotations

import torch

DTYPES = (torch.float32, torch.float16, torch.bfloat16)

TOLERANCE = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
    torch.float64: (1e-12, 1e-12),
}


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> None:
    """``actual`` (any device) equals the cpu ``expected`` within ``dtype``'s tolerance."""
    atol, rtol = TOLERANCE[dtype]
    torch.testing.assert_close(
        actual.detach().cpu().double(), expected.detach().cpu().double(),
        atol=atol * scale, rtol=rtol * scale,
    )


def npu_leaf(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The same values, in ``dtype``, on npu, as a leaf that requires grad."""
    return t.to(dtype).to("npu").detach().requires_grad_(True)


def cpu_leaf(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The values ``npu_leaf`` rounds to, in float64 on cpu, as a leaf that requires grad."""
    return t.to(dtype).double().detach().requires_grad_(True)


def opcheck(op, args, kwargs=None) -> None:
    """opcheck's schema, fake-tensor and AOT-dispatch checks (its autograd-registration check
    knows only cpu/cuda/xpu tensors in PyTorch 2.13)."""
    torch.library.opcheck(
        op, args, kwargs or {}, test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")
    )
