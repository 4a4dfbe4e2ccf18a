"""What the client-library tests share: where their workers live, the small device they run
on, and the toolkit environment as a shell that evaluates ``python -m torch_npu.toolkit env``
gets it.
"""
from __future__ import annotations

import os
import subprocess
import sys

CLIENT_WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")

# Small devices: the tiny models need a few MB, and a small card shows sizing mistakes.
SMALL_DEVICE = {"TORCH_NPU_MEMORY_CAPACITY_MB": "512"}


def worker(name: str) -> str:
    return os.path.join(CLIENT_WORKERS, name)


def toolkit_environment(home_dir) -> dict[str, str]:
    """The variables ``eval "$(python -m torch_npu.toolkit env home_dir)"`` sets in a shell."""
    script = f'eval "$("{sys.executable}" -m torch_npu.toolkit env "{home_dir}")" && env -0'
    before = dict(os.environ)
    out = subprocess.run(["bash", "-c", script], check=True, capture_output=True, timeout=120,
                         env=before).stdout.decode()
    after = dict(line.split("=", 1) for line in out.split("\0") if "=" in line)
    return {k: v for k, v in after.items() if before.get(k) != v and k not in ("_", "SHLVL", "PWD", "OLDPWD")}
