"""Shared set-up for the Inductor-on-npu tests: each test starts from a reset Dynamo.

The session-wide Inductor cache directory is set in test/conftest.py.
"""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    # Each test compiles its own functions; forget frames compiled by the previous one.
    import torch._dynamo

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
