"""Runs a snippet in a fresh interpreter, for tests of import order and laziness.

Import state can only be observed in a new process. The child imports torch_npu from
this checkout and inherits the session's Inductor cache directory (see conftest.py).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(
    code: str, *, env: dict[str, str] | None = None, cwd: str = REPO_ROOT, timeout: float = 600
) -> str:
    """Run ``code`` in a fresh interpreter; return its stdout, fail the test if it fails.

    ``env`` adds to (or overrides) this process's environment; a ``PYTHONPATH`` in it
    comes first (so a test can put an installed copy ahead), then this checkout.
    """
    env = dict(env or {})
    extra_path = env.pop("PYTHONPATH", "")
    child_env = {**os.environ, **env}
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (extra_path, REPO_ROOT, os.environ.get("PYTHONPATH", "")) if p
    )
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
            f"child failed with {result.returncode}\n--- stdout\n{result.stdout}"
            f"\n--- stderr\n{result.stderr}"
        )
    return result.stdout
