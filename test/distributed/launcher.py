"""Runs worker scripts on several processes under torchrun and collects what each rank reports.

Everything stays on 127.0.0.1 with ports picked free at run time, and every launch has a
hard timeout: on expiry the whole process tree of the launch (torchrun and its workers,
started in their own session) is killed, so a hung collective can never hang the suite.
Workers report with ``harness.report(...)`` (a ``RESULT {json}`` line per rank).

The suite runs a fixed subset on 2 ranks. ``TORCH_NPU_DIST_FULL=1`` (what
scripts/run_distributed_full.sh sets) runs the world-size-generic checks on 3 and 4 ranks
too: odd worlds and more than one peer per rank, at several times the cost.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "workers")
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
FULL_SET = os.environ.get("TORCH_NPU_DIST_FULL") == "1"


def world_sizes() -> list[int]:
    """The numbers of processes the world-size-generic tests run on."""
    return [2, 3, 4] if FULL_SET else [2]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Launch:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    results: dict[int, list[dict]] = field(default_factory=dict)

    def result(self, rank: int, key: str | None = None):
        """The last report of ``rank`` (merged over its reports when ``key`` is None)."""
        merged: dict = {}
        for r in self.results.get(rank, []):
            merged.update(r)
        return merged if key is None else merged[key]

    def explain(self) -> str:
        return f"exit {self.returncode} after {self.seconds:.1f} s\n--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-12000:]}"


def _parse(stdout: str) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    decoder = json.JSONDecoder()
    for line in stdout.splitlines():
        # raw_decode: other output may follow the object on the same line.
        for chunk in line.split("RESULT ")[1:]:
            try:
                payload, _ = decoder.raw_decode(chunk)
            except json.JSONDecodeError:
                continue
            out.setdefault(int(payload.pop("rank")), []).append(payload)
    return out


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TORCH_NPU_DEVICE_COUNT", "2")
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (WORKERS, REPO_ROOT, os.environ.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def _finish(procs: list[subprocess.Popen], timeout: float) -> list[tuple[int, str, str]]:
    deadline = time.monotonic() + timeout
    outputs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(deadline - time.monotonic(), 0.1))
            outputs.append((p.returncode, out, err))
        except subprocess.TimeoutExpired:
            for q in procs:
                try:
                    os.killpg(q.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            out, err = p.communicate()
            raise TimeoutError(f"launch did not finish within {timeout} s (killed)\n{out[-4000:]}\n{err[-8000:]}")
    return outputs


def torchrun_argv(script: str, args, nproc: int, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", *extra,
            os.path.join(WORKERS, script), *map(str, args)]


def torchrun(script: str, *args, nproc: int = 2, timeout: float = 180, env: dict | None = None) -> Launch:
    """``torchrun --nproc-per-node nproc`` on one node (static rendezvous on 127.0.0.1)."""
    port = free_port()
    argv = torchrun_argv(script, args, nproc, ["--master-addr=127.0.0.1", f"--master-port={port}"])
    start = time.monotonic()
    (rc, out, err), = _finish([_start(argv, _env(env))], timeout)
    return Launch(rc, out, err, time.monotonic() - start, _parse(out))


def torchrun_nodes(script: str, *args, nnodes: int = 2, nproc: int = 1, timeout: float = 180,
                   env: dict | None = None) -> Launch:
    """``nnodes`` torchrun agents on this machine ("nodes"), joined by a c10d rendezvous on 127.0.0.1."""
    port = free_port()
    procs = []
    start = time.monotonic()
    for node in range(nnodes):
        node_env = _env({**(env or {}), "TEST_NODE_RANK": str(node)})
        extra = [f"--nnodes={nnodes}", f"--node-rank={node}", "--rdzv-backend=c10d",
                 f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=torch-npu-test"]
        procs.append(_start(torchrun_argv(script, args, nproc, extra), node_env))
    outputs = _finish(procs, timeout)
    rc = max(abs(o[0]) for o in outputs)
    out = "\n".join(o[1] for o in outputs)
    err = "\n".join(o[2] for o in outputs)
    return Launch(rc, out, err, time.monotonic() - start, _parse(out))


def spawn_ranks(script: str, *args, nproc: int = 2, timeout: float = 120, env: dict | None = None) -> Launch:
    """Start ``nproc`` plain processes (env:// rendezvous on 127.0.0.1) without torchrun, so
    that a rank that dies does not take the others down: fault tests see every exit code.
    ``Launch.returncode`` is the first non-zero exit code; ``Launch.codes`` has all of them."""
    port = free_port()
    procs = []
    start = time.monotonic()
    for rank in range(nproc):
        rank_env = _env({**(env or {}), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                         "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc)})
        procs.append(_start([sys.executable, os.path.join(WORKERS, script), *map(str, args)], rank_env))
    outputs = _finish(procs, timeout)
    codes = [o[0] for o in outputs]
    out = "\n".join(o[1] for o in outputs)
    err = "\n".join(f"--- rank {i} ---\n{o[2]}" for i, o in enumerate(outputs))
    launch = Launch(next((c for c in codes if c != 0), 0), out, err, time.monotonic() - start, _parse(out))
    launch.codes = codes
    return launch
