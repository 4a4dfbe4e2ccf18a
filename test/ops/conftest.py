"""Shared set-up for the fused npu_* operator tests: torch_npu loaded, a fixed seed, and a
fresh interpreter for the registration-time checks."""
from __future__ import annotations

import pytest
import torch
from fresh_interpreter import run_python

import torch_npu  # noqa: F401  (registers the npu device and the npu_* operators)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def python():
    return run_python
