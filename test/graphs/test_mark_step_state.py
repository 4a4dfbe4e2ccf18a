"""mark_step_begin(): signature ``()``, shared counter, and no compiler import when called.

Import state can only be observed in a fresh interpreter, so those checks run in one.
"""
import inspect
import os
import subprocess
import sys
import textwrap

import torch

import torch_npu

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_signature_and_counter():
    from torch_npu.npu import _graph_step_state

    assert not inspect.signature(torch_npu.npu.mark_step_begin).parameters
    assert torch.npu.mark_step_begin is _graph_step_state.mark_step_begin
    from torch_npu import compiler

    assert compiler.npugraph_mark_step_begin is _graph_step_state.mark_step_begin
    before = _graph_step_state.current_step()
    torch_npu.npu.mark_step_begin()
    torch_npu.npu.mark_step_begin()
    assert _graph_step_state.current_step() == before + 2


def test_calling_mark_step_begin_imports_no_compiler_module():
    code = textwrap.dedent(
        """
        import sys
        import torch_npu
        torch_npu.npu.mark_step_begin()
        import torch
        torch.npu.mark_step_begin()
        import torch_npu.compiler
        torch_npu.compiler.npugraph_mark_step_begin()
        bad = sorted(
            m for m in sys.modules
            if m.startswith(("torch._dynamo", "torch._inductor", "torch_npu.compiler.", "torch_npu.dynamo"))
        )
        print("BAD", bad)
        print("INIT", torch.npu.is_initialized())
        """
    )
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "BAD []" in out.stdout, out.stdout
    assert "INIT False" in out.stdout, out.stdout
