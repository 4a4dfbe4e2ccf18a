"""The graph trees load only when a graph is compiled with them: resetting compilers and
loading the reduce-overhead notice leave them unloaded (checked in a fresh interpreter)."""
import os
import subprocess
import sys
import textwrap

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_reset_and_notice_do_not_load_the_trees():
    code = textwrap.dedent(
        """
        import sys
        import torch
        import torch_npu
        torch.compiler.reset()
        from torch_npu.compiler.backends import npugraphs as npugraphs_backend
        npugraphs_backend.reset()
        from torch_npu.compiler.inductor import reduce_overhead
        loaded = sorted(m for m in sys.modules if m.startswith("torch_npu.compiler.graph_trees."))
        print("LOADED", loaded)
        print("INIT", torch.npu.is_initialized())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr
    assert "LOADED []" in out.stdout, out.stdout
    assert "INIT False" in out.stdout, out.stdout


def test_backend_and_trees_import_each_other_only_one_way():
    # The npugraphs backend builds on the trees; the trees (also used by npugraph_ex and
    # mode="reduce-overhead") never import a backend module.
    code = textwrap.dedent(
        """
        import importlib, pkgutil, sys
        import torch, torch._dynamo, torch_npu
        import torch_npu.compiler.graph_trees as trees
        for info in pkgutil.iter_modules(trees.__path__):
            importlib.import_module(f"{trees.__name__}.{info.name}")
        print("BACKENDS", sorted(m for m in sys.modules if m.startswith("torch_npu.compiler.backends.npugraphs")))
        for name in [m for m in sys.modules if m.startswith("torch_npu.compiler.graph_trees")]:
            del sys.modules[name]
        importlib.import_module("torch_npu.compiler.backends.npugraphs")
        print("TREES", sorted(m for m in sys.modules if m.startswith("torch_npu.compiler.graph_trees")))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr
    assert "BACKENDS []" in out.stdout, out.stdout
    assert "TREES []" in out.stdout, out.stdout
