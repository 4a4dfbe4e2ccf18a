"""The README's first command runs demo/train.py; it must keep working and keep checking.

The demo trains on npu eager, Inductor (default and mlir) and npugraphs, and exits non-zero
when a path disagrees with cpu, records no NPU graph, or hands an MLIR kernel back to C++.
A short run here keeps that command honest.
"""
from __future__ import annotations

import importlib.util
import os

from fresh_interpreter import REPO_ROOT, run_python


def test_demo_trains_every_path_and_agrees_with_cpu():
    demo = os.path.join(REPO_ROOT, "demo", "train.py")
    out = run_python(f"import runpy, sys; sys.argv = ['train.py', '--steps', '8']; "
                     f"runpy.run_path({demo!r}, run_name='__main__')")
    rows = {line.split("  ")[0]: line for line in out.splitlines()}
    for path in ("npu eager", "inductor default", "npugraphs"):
        assert path in rows and "acc " in rows[path], out
    assert "0 eager" in rows["npugraphs"] and "0 recorded" not in rows["npugraphs"], out
    if importlib.util.find_spec("torch_mlir"):
        assert "0 C++ fallbacks" in rows["inductor mlir"], out
    else:
        assert "not run: torch-mlir is not installed" in rows["inductor mlir"], out
