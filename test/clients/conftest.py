"""Client-library tests run the libraries unchanged in fresh processes (torchrun for the
distributed ones, see test/distributed/launcher.py), each launch with a hard timeout.

The toolkit environment is what a user gets from ``eval "$(python -m torch_npu.toolkit env
DIR)"``: the export lines are evaluated by a shell, and the variables they set are passed to
the launches, nothing else by hand.
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_WORKERS = os.path.join(HERE, "workers")
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "distributed"))
sys.path.insert(0, HERE)

# Small devices: the tiny models need a few MB, and a small card shows sizing mistakes.
SMALL_DEVICE = {"TORCH_NPU_MEMORY_CAPACITY_MB": "512"}


def toolkit_environment(home_dir) -> dict[str, str]:
    """The variables ``eval "$(python -m torch_npu.toolkit env home_dir)"`` sets in a shell."""
    script = f'eval "$("{sys.executable}" -m torch_npu.toolkit env "{home_dir}")" && env -0'
    before = dict(os.environ)
    out = subprocess.run(["bash", "-c", script], check=True, capture_output=True, timeout=120,
                         env=before).stdout.decode()
    after = dict(line.split("=", 1) for line in out.split("\0") if "=" in line)
    return {k: v for k, v in after.items() if before.get(k) != v and k not in ("_", "SHLVL", "PWD", "OLDPWD")}


@pytest.fixture(scope="session")
def toolkit_env(tmp_path_factory):
    return toolkit_environment(tmp_path_factory.mktemp("ascend"))


def worker(name: str) -> str:
    return os.path.join(CLIENT_WORKERS, name)
