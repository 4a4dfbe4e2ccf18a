"""npu tensors cross process boundaries as cuda tensors do: a spawned child receives the
same memory (its writes are seen by the parent and the parent's by it), and DataLoader
workers started by spawn yield npu tensors; workers forked after the parent used the
device fail the way CUDA's do.

Every run is a fresh interpreter with a hard timeout (and timeouts on every wait inside).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    child_env = dict(os.environ)
    child_env.update(env or {})
    child_env.setdefault("TORCH_NPU_MEMORY_CAPACITY_MB", "1024")
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, REPO_ROOT, os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-c", code], env=child_env, capture_output=True, text=True,
                          timeout=240, cwd=REPO_ROOT)


def _report(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("REPORT"))
    return json.loads(line[len("REPORT"):])


_SPAWN_CHILD = """
import json, torch, torch_npu
import torch.multiprocessing as mp
from sharing_workers import read_write_then_read_again

SIZE = {size}
base = torch.arange(SIZE * 2, dtype=torch.float32).reshape(2, SIZE)
x = base.to("npu")[:, 1:]          # a view: storage offset 1, strided
expected = base[:, 1:]
ctx = mp.get_context("spawn")
results, parent_wrote = ctx.Queue(), ctx.Event()
child = ctx.Process(target=read_write_then_read_again, args=(x, results, parent_wrote))
child.start()
read = results.get(timeout=120)
written = results.get(timeout=60)
seen_by_parent = x.cpu()
x.add_(1)                           # the parent writes; the child reads it
parent_wrote.set()
read_again = results.get(timeout=60)
child.join(60)
print("REPORT" + json.dumps({{
    "exitcode": child.exitcode,
    "child_device": read[1],
    "child_read_ok": torch.equal(torch.tensor(read[2]), expected),
    "parent_sees_write": torch.equal(seen_by_parent, expected * 10),
    "child_sees_write": torch.equal(torch.tensor(read_again[1]), expected * 10 + 1),
    "parent_tensor_ok": torch.equal(x.cpu(), expected * 10 + 1),
}}))
"""


@pytest.mark.parametrize("size,conf", [(4, ""), (300_000, ""), (300_000, "expandable_segments:True")])
def test_spawn_child_shares_the_memory_of_an_npu_tensor(size, conf):
    # 4 floats: a small-pool block; 300k: a large-pool block over several host pages.
    report = _report(_run(_SPAWN_CHILD.format(size=size), env={"PYTORCH_NPU_ALLOC_CONF": conf}))
    assert report == {
        "exitcode": 0, "child_device": "npu:0", "child_read_ok": True, "parent_sees_write": True,
        "child_sees_write": True, "parent_tensor_ok": True,
    }


_DATALOADER = """
import json, torch, torch_npu
from sharing_workers import NpuSquares

loader = torch.utils.data.DataLoader(NpuSquares(), batch_size=2, num_workers=2, multiprocessing_context="spawn")
batches = list(loader)
expected = [torch.stack([torch.full((3,), float(i)) ** 2 for i in (2 * b, 2 * b + 1)]) for b in range(4)]
print("REPORT" + json.dumps({
    "devices": sorted({str(b.device) for b in batches}),
    "equal": [torch.equal(b.cpu(), e) for b, e in zip(batches, expected)],
}))
"""


def test_dataloader_spawn_workers_yield_npu_tensors():
    report = _report(_run(_DATALOADER))
    assert report == {"devices": ["npu:0"], "equal": [True] * 4}


_FORKED_WORKERS = """
import torch, torch_npu
from sharing_workers import NpuSquares

torch.ones(1, device="npu")         # the parent has initialised the device
loader = torch.utils.data.DataLoader(NpuSquares(), batch_size=2, num_workers=2, multiprocessing_context="fork")
try:
    list(loader)
    print("NO ERROR")
except RuntimeError as exc:
    print("ERROR", str(exc).replace(chr(10), " "))
"""


def test_dataloader_forked_workers_fail_as_cuda_ones_do():
    result = _run(_FORKED_WORKERS)
    assert result.returncode == 0, result.stderr
    assert "Caught RuntimeError in DataLoader worker process" in result.stdout
    assert "Cannot re-initialize npu in forked subprocess" in result.stdout


def test_npu_storages_are_refused_as_cuda_ones_are_and_cpu_storages_still_share():
    report = _report(_run("""
import io, json, pickle, torch, torch_npu
from multiprocessing.reduction import ForkingPickler
def dump(obj):
    buf = io.BytesIO()
    ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()
try:
    dump(torch.ones(3, device="npu").untyped_storage())
    refused = ""
except RuntimeError as exc:
    refused = str(exc)
cpu = torch.arange(3.0).untyped_storage()
rebuilt = pickle.loads(dump(cpu))
print("REPORT" + json.dumps({"refused": refused, "cpu_shared": cpu.is_shared(), "cpu_equal": rebuilt.tolist() == cpu.tolist()}))
"""))
    assert report == {"refused": "Cannot pickle npu storage; try pickling an npu tensor instead",
                      "cpu_shared": True, "cpu_equal": True}


def test_pickling_for_another_process_keeps_cpu_tensors_on_torchs_path():
    report = _report(_run("""
import io, json, pickle, torch, torch_npu
from multiprocessing.reduction import ForkingPickler
from torch.multiprocessing import reductions
t = torch.arange(3.0)
buf = io.BytesIO()
ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(t)
rebuilt = pickle.loads(buf.getvalue())
print("REPORT" + json.dumps({"equal": torch.equal(rebuilt, t), "shared": t.is_shared()}))
"""))
    assert report == {"equal": True, "shared": True}


def test_a_forked_child_freeing_inherited_npu_memory_leaves_the_parents_intact():
    # Forked children share the parent's device memory file; what they free and release
    # must not be punched out of it.
    report = _report(_run("""
import gc, json, os, torch, torch_npu
y = torch.arange(3 << 20, dtype=torch.float32, device="npu")   # 12 MiB: a segment of its own
expected = torch.arange(3 << 20, dtype=torch.float32)
pid = os.fork()
if pid == 0:
    try:
        del y
        gc.collect()
        try:
            torch.npu.empty_cache()
        except Exception:
            pass
    finally:
        os._exit(0)
_, status = os.waitpid(pid, 0)
print("REPORT" + json.dumps({"child_status": status, "parent_intact": torch.equal(y.cpu(), expected)}))
"""))
    assert report == {"child_status": 0, "parent_intact": True}
