"""Set-up of the real-model tests: torchvision importable, helpers on the path, and
compiled code and recorded graphs reset between tests."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import torchvision_schemas  # noqa: E402  (test/, on the path through test/conftest.py)

torchvision_schemas.define()


@pytest.fixture(autouse=True)
def _fresh_compiled_state(fresh_compiled_state):
    yield
