"""A third-party package adds an ``npu_backend`` value through an entry point.

The test builds a tiny plugin distribution in a temporary directory, installs it with pip
(``--no-deps --no-build-isolation`` into a private target directory, so the environment is
left as it was) and uses it from a fresh interpreter that has that directory on its path.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap

from fresh_interpreter import run_python

PYPROJECT = """
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "tiny-npu-inductor-plugin"
version = "0.1.0"

[project.entry-points."torch_npu.inductor_backends"]
tiny = "tiny_npu_plugin.scheduling:TinyScheduling"

[tool.setuptools]
packages = ["tiny_npu_plugin"]
"""

SCHEDULING = '''
"""A plugin npu backend: the default C++ kernels, remembering that it was used."""
from torch_npu.compiler.inductor.default_scheduling import NpuCppScheduling

scheduled_graphs = 0


class TinyScheduling(NpuCppScheduling):
    def __init__(self, scheduler):
        global scheduled_graphs
        super().__init__(scheduler)
        if scheduler is not None:
            scheduled_graphs += 1
'''


def install_plugin(tmp_path) -> str:
    src = tmp_path / "src"
    (src / "tiny_npu_plugin").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PYPROJECT)
    (src / "tiny_npu_plugin" / "__init__.py").write_text('"""Tiny npu_backend plugin."""\n')
    (src / "tiny_npu_plugin" / "scheduling.py").write_text(SCHEDULING)
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
            "--no-build-isolation", "--no-index", "--target", str(target), str(src),
        ],
        check=True,
        cwd=tmp_path,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    return str(target)


def test_plugin_backend_is_listed_loaded_only_when_chosen_and_used(tmp_path):
    site = install_plugin(tmp_path)
    code = textwrap.dedent("""
        import sys
        import torch, torch_npu
        from torch_npu.compiler.inductor import backend_registry

        assert backend_registry.available_backends() == ("default", "mlir", "tiny")
        x = torch.randn(16, 8)
        # A constant of this run makes the graph new to a cache directory that may be
        # shared with earlier runs, so the plugin really compiles it.
        scale = SCALE
        fn = lambda t: torch.relu(t) * t.exp() * scale

        out = torch.compile(fn, options={"npu_backend": "default"})(x.npu())
        torch.testing.assert_close(out.cpu(), fn(x))
        assert "tiny_npu_plugin.scheduling" not in sys.modules

        out = torch.compile(fn, options={"npu_backend": "tiny"})(x.npu())
        torch.testing.assert_close(out.cpu(), fn(x))
        import tiny_npu_plugin.scheduling as plugin
        assert plugin.scheduled_graphs == 1, plugin.scheduled_graphs

        try:
            torch.compile(fn, options={"npu_backend": "tiny2"})(x.npu())
        except Exception as exc:
            assert "valid values: default, mlir, tiny" in str(exc), exc
        else:
            raise AssertionError("no error")
        print("ok")
    """).replace("SCALE", repr(1.0 + random.random()))
    assert run_python(code, env={"PYTHONPATH": site}).strip() == "ok"
