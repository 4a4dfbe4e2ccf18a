"""Fork safety as on CUDA: a child forked from a process that initialised npu gets a clear
error naming the spawn start method; a process that only set up the compile layer may fork
and its child uses and compiles on npu; spawned children always work."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

_CHILD_REPORT = """
import os, torch, torch_npu
{parent}
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read)
    try:
        y = torch.ones(2, device="npu") * 2
        msg = "ok " + str(y.sum().item())
        {child_extra}
    except Exception as exc:
        msg = "error " + str(exc)
    os.write(write, msg.encode())
    os._exit(0)
os.close(write)
os.waitpid(pid, 0)
print(os.read(read, 4096).decode())
print("parent", (torch.ones(1, device="npu") + 1).item())
"""


def _run(parent: str, child_extra: str = "pass") -> list[str]:
    code = _CHILD_REPORT.format(parent=parent, child_extra=child_extra)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()


def test_child_of_initialised_parent_is_told_to_spawn():
    lines = _run("x = torch.ones(3, device='npu'); assert not torch.npu._is_in_bad_fork()")
    assert lines[0].startswith("error Cannot re-initialize npu in forked subprocess"), lines
    assert "'spawn' start method" in lines[0]
    assert lines[1] == "parent 2.0"


def test_tensors_inherited_by_the_child_are_refused_too():
    lines = _run("x = torch.ones(3, device='npu')", child_extra="msg += str((x + 1).sum().item())")
    assert lines[0].startswith("error Cannot re-initialize npu"), lines


def test_compile_layer_setup_without_npu_init_may_fork():
    parent = "torch.compiler.list_backends(); assert not torch.npu.is_initialized()"
    extra = "f = torch.compile(lambda a: a.sin() + 1, backend='eager'); msg += ' compiled ' + str(round(f(y).sum().item(), 4))"
    lines = _run(parent, extra)
    assert lines[0] == "ok 4.0 compiled 3.8186", lines


def test_spawned_child_uses_npu(tmp_path):
    script = tmp_path / "spawn_child.py"
    script.write_text(textwrap.dedent(
        """
        import multiprocessing as mp
        import torch, torch_npu

        def work(q):
            q.put((torch.ones(2, device="npu") * 3).sum().item())

        if __name__ == "__main__":
            torch.ones(1, device="npu")
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            p = ctx.Process(target=work, args=(q,))
            p.start()
            print(q.get(timeout=120))
            p.join(60)
        """
    ))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "6.0"
