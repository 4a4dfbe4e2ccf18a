"""Shared set-up for the Inductor-on-npu tests.

All tests of the session, and the fresh interpreters some of them start, share one
Inductor cache directory, so each distinct graph is compiled by g++ once per session.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Set before anything asks Inductor for its cache directory (it reads the variable then).
os.environ.setdefault(
    "TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="torch_npu_inductor_cache_")
)


def run_python(code: str, *, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    """Run ``code`` in a fresh interpreter that imports torch_npu from this checkout.

    Returns stdout; fails the test with the child's output when it exits non-zero.
    """
    env = dict(env or {})
    extra_path = env.pop("PYTHONPATH", "")
    child_env = {**os.environ, **env}
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (REPO_ROOT, extra_path, os.environ.get("PYTHONPATH", "")) if p
    )
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=child_env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"child interpreter failed ({proc.returncode})\n--- stdout\n{proc.stdout}"
            f"\n--- stderr\n{proc.stderr}"
        )
    return proc.stdout


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    # Each test compiles its own functions; forget frames compiled by the previous one.
    import torch._dynamo

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
