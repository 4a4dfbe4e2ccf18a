"""Distributed tests launch real torchrun processes (see launcher.py); each has a hard timeout."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from launcher import FULL_SET  # noqa: E402


def pytest_report_header(config):
    if FULL_SET:
        return "distributed: full set (2, 3 and 4 ranks)"
    return "distributed: CI subset on 2 ranks; scripts/run_distributed_full.sh adds 3 and 4 ranks"
