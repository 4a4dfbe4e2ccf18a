"""Fixtures of the transfer_to_npu tests: everything that applies the patch group runs in a
fresh interpreter, so this test process never has it applied."""
from __future__ import annotations

import pytest
from fresh_interpreter import run_python


@pytest.fixture
def python():
    return run_python
