"""Helpers for the compile-shim tests: fresh interpreters for import-state checks.

Import order and laziness can only be observed in a new process, so those tests run a
snippet with ``run_python`` and assert on its output. Every child shares one Inductor
cache directory for the whole session to keep C++ compiles few.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_CACHE_DIR = tempfile.mkdtemp(prefix="torch_npu_test_inductor_cache_")


def run_python(
    code: str, *, env: dict[str, str] | None = None, cwd: str = REPO_ROOT, timeout: float = 240
) -> str:
    """Run ``code`` in a fresh interpreter (from the repo root); return stdout, fail on error."""
    child_env = dict(os.environ)
    child_env.setdefault("TORCHINDUCTOR_CACHE_DIR", _CACHE_DIR)
    child_env.update(env or {})
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        pytest.fail(
            f"child failed with {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
    return result.stdout


@pytest.fixture
def python():
    return run_python
