"""Client-library tests run the libraries unchanged in fresh processes (torchrun for the
distributed ones, see test/distributed/launcher.py), each launch with a hard timeout.

The toolkit environment is what a user gets from ``eval "$(python -m torch_npu.toolkit env
DIR)"``: the export lines are evaluated by a shell, and the variables they set are passed to
the launches, nothing else by hand.
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "distributed"))
sys.path.insert(0, HERE)

from client_launch import toolkit_environment  # noqa: E402


def pytest_report_header(config):
    if os.environ.get("TORCH_NPU_CLIENTS_FULL") == "1":
        return "client libraries: full set"
    return "client libraries: CI subset; scripts/run_client_libraries_full.sh runs the full set"


@pytest.fixture(scope="session")
def toolkit_env(tmp_path_factory):
    return toolkit_environment(tmp_path_factory.mktemp("ascend"))
