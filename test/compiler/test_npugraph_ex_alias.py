"""``npugraph_ex`` as a standalone-style package behind ``torch_npu.dynamo.npugraph_ex``.

Covers the regression of a proxy object standing in for the package: the pipeline that
copies a standalone ``npugraph_ex`` over ``torch_npu/dynamo/npugraph_ex`` and then runs
``import npugraph_ex; npugraph_ex.npu_fx_compiler._optimize_fx``.
"""
from __future__ import annotations

import os
import shutil
import textwrap

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_real_modules_one_identity_nothing_imported_until_asked(python):
    out = python(
        """
        import importlib, os, pickle, sys
        import torch_npu
        print("lazy", "npugraph_ex" in sys.modules, "torch_npu.dynamo" in sys.modules)

        import npugraph_ex
        print("attrs", hasattr(npugraph_ex, "npu_fx_compiler"),
              callable(npugraph_ex.npu_fx_compiler._optimize_fx))
        bundled = os.path.join(os.path.dirname(torch_npu.__file__ or torch_npu.__path__[0] + "/x"), "dynamo", "npugraph_ex")
        print("spec", npugraph_ex.__spec__.name, npugraph_ex.__path__ == [bundled],
              npugraph_ex.__spec__.origin == os.path.join(bundled, "__init__.py"))
        print("dynamo", "torch._dynamo" in sys.modules)

        import torch_npu.dynamo.npugraph_ex as alias
        import torch_npu.dynamo.npugraph_ex.configs as alias_configs
        from npugraph_ex.npu_fx_compiler import _optimize_fx
        print("same", alias is npugraph_ex, torch_npu.dynamo.npugraph_ex is npugraph_ex,
              alias.npu_fx_compiler is sys.modules["npugraph_ex.npu_fx_compiler"],
              alias_configs is npugraph_ex.configs, _optimize_fx is alias.npu_fx_compiler._optimize_fx,
              sys.modules["torch_npu.dynamo.npugraph_ex"] is npugraph_ex,
              npugraph_ex.__spec__.name, alias_configs.__spec__.name)

        reloaded = importlib.reload(npugraph_ex)
        print("reload", reloaded is npugraph_ex, reloaded.__spec__.name)

        config = npugraph_ex.CompilerConfig()
        config.capture = False
        clone = pickle.loads(pickle.dumps(config))
        print("pickle", type(clone).__module__, clone == config)
        """
    ).splitlines()
    assert out == [
        "lazy False False",
        "attrs True True",
        "spec npugraph_ex True True",
        "dynamo False",
        "same True True True True True True npugraph_ex npugraph_ex.configs",
        "reload True npugraph_ex",
        "pickle npugraph_ex.configs True",
    ]


def test_independently_installed_distribution_wins(python, tmp_path):
    package = tmp_path / "npugraph_ex"
    package.mkdir()
    (package / "__init__.py").write_text("ORIGIN = 'independent'\n")
    out = python(
        """
        import torch_npu, npugraph_ex
        import torch_npu.dynamo.npugraph_ex as alias
        import torch_npu.dynamo
        print(npugraph_ex.ORIGIN, alias is npugraph_ex, torch_npu.dynamo.npugraph_ex is npugraph_ex)
        """,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert out.split() == ["independent", "True", "True"]


STANDALONE_INIT = '''
"""A standalone npugraph_ex, as an external pipeline ships it."""
from npugraph_ex.npu_fx_compiler import (
    compile_fx, get_npu_backend, get_compiler
)
'''

STANDALONE_COMPILER = '''
def _optimize_fx(gm):
    return gm

def compile_fx(gm, example_inputs):
    return gm

def get_compiler(compiler_config=None):
    return compile_fx

def get_npu_backend(compiler_config=None):
    return compile_fx
'''


def test_standalone_package_copied_over_the_bundled_one(python, tmp_path):
    """The failing pipeline: copy a standalone npugraph_ex into an installed torch_npu."""
    installed = tmp_path / "site"
    shutil.copytree(
        os.path.join(REPO_ROOT, "torch_npu"),
        installed / "torch_npu",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    target = installed / "torch_npu" / "dynamo" / "npugraph_ex"
    shutil.rmtree(target)
    target.mkdir()
    (target / "__init__.py").write_text(textwrap.dedent(STANDALONE_INIT))
    (target / "npu_fx_compiler.py").write_text(textwrap.dedent(STANDALONE_COMPILER))
    out = python(
        """
        import torch_npu
        import npugraph_ex
        assert hasattr(npugraph_ex, "npu_fx_compiler")
        assert hasattr(npugraph_ex.npu_fx_compiler, "_optimize_fx")
        optimize_fx_bak = npugraph_ex.npu_fx_compiler._optimize_fx
        import torch_npu.dynamo
        print(torch_npu.__path__[0] == str(site / "torch_npu"),
              npugraph_ex.__file__.startswith(torch_npu.__path__[0]),
              torch_npu.dynamo.npugraph_ex is npugraph_ex, optimize_fx_bak.__module__)
        """.replace("str(site / \"torch_npu\")", repr(str(installed / "torch_npu"))),
        env={"PYTHONPATH": str(installed)},
        cwd=str(tmp_path),
    )
    assert out.split() == ["True", "True", "True", "npugraph_ex.npu_fx_compiler"]
