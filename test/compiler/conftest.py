"""Fixtures of the compile-shim tests: a fresh interpreter for import-state checks."""
from __future__ import annotations

import pytest
from fresh_interpreter import run_python


@pytest.fixture
def python():
    return run_python
