"""Inductor's layout optimisation on npu convolutions: channels-last conv inputs.

With layout optimisation Inductor feeds convolutions channels-last inputs and asserts the
layout of every conv output (``assert_size_stride``) as the fake rule predicts it. The npu
convolution must produce exactly that layout, in the forward and in the backward.
"""
from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: E402  (a missing package is a failure, not a skip)

from inductor_models import SmallCNN, assert_forward_backward_matches_cpu  # noqa: E402


@pytest.mark.parametrize("npu_backend", ["default", "mlir"])
def test_small_cnn_with_forced_layout_optimization_matches_cpu(npu_backend):
    if npu_backend == "mlir":
        pytest.importorskip("torch_mlir")
    options = {"npu_backend": npu_backend, "force_layout_optimization": True}
    assert_forward_backward_matches_cpu(
        SmallCNN,
        lambda: torch.randn(4, 3, 16, 16),
        lambda model: torch.compile(model, backend="inductor", options=options),
        grad_rtol=1e-3,
    )
