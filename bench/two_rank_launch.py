"""Launches a benchmark script's worker on two local processes under torchrun and returns
what rank 0 reports, so the distributed benchmarks share one way to start and to fail.

Everything stays on 127.0.0.1 on a port picked free at launch; workers run with one
OpenMP thread each, because two ranks share the machine's cores.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_two_ranks(script: str, worker_args: list[str], marker: str, timeout: float = 1800):
    """Runs ``script --worker *worker_args`` on two ranks; returns the JSON that follows
    ``marker`` on a line of their output. Exits with both outputs when the launch fails."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--master-addr=127.0.0.1",
            f"--master-port={_free_port()}", os.path.abspath(script), "--worker", *worker_args]
    out = subprocess.run(argv, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                         timeout=timeout)
    if out.returncode != 0:
        sys.exit(f"benchmark failed:\n{out.stdout[-3000:]}\n{out.stderr[-6000:]}")
    prefix = marker + " "
    return json.loads(next(l for l in out.stdout.splitlines() if l.startswith(prefix))[len(prefix):])
