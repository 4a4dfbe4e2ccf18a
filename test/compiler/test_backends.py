"""The npu Dynamo backends: entry points, registration from either path, results, reset.

Entry points exist once the package is pip-installed (the test command does that). Where
they are missing (a source checkout on ``sys.path``), an equivalent ``.dist-info`` naming
the same objects is put on the child's path, so the entry-point path is still exercised.
"""
from __future__ import annotations

import os
import re
from importlib.metadata import entry_points

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NO_AUTOLOAD = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
OUR_BACKENDS = ("npu", "npugraph_ex", "npugraphs")


def _declared_entry_points() -> list[str]:
    with open(os.path.join(REPO_ROOT, "setup.py")) as f:
        source = f.read()
    return re.findall(r'"(npu\w* = torch_npu\.compiler\.backends\.registry:\w+)"', source)


@pytest.fixture
def entry_point_env(tmp_path):
    """Child env whose ``torch_dynamo_backends`` group has our three entry points."""
    installed = {ep.name for ep in entry_points(group="torch_dynamo_backends")}
    env = dict(NO_AUTOLOAD)
    if not set(OUR_BACKENDS) <= installed:
        dist = tmp_path / "torch_npu_entry_points-0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch_npu_entry_points\nVersion: 0\n")
        lines = "\n".join(_declared_entry_points())
        (dist / "entry_points.txt").write_text(f"[torch_dynamo_backends]\n{lines}\n")
        env["PYTHONPATH"] = str(tmp_path)
    return env


def test_setup_py_declares_the_registry_entries():
    assert _declared_entry_points() == [
        "npu = torch_npu.compiler.backends.registry:npu_backend_entry",
        "npugraph_ex = torch_npu.compiler.backends.registry:npugraph_ex_backend_entry",
        "npugraphs = torch_npu.compiler.backends.registry:npugraphs_backend_entry",
    ]


def test_loading_entry_points_imports_neither_dynamo_nor_inductor(python, entry_point_env):
    out = python(
        """
        import sys
        from importlib.metadata import entry_points
        eps = entry_points(group="torch_dynamo_backends")
        loaded = {name: eps[name].load() for name in ("npu", "npugraph_ex", "npugraphs")}
        heavy = [m for m in sys.modules if m.startswith(("torch._dynamo", "torch._inductor"))]
        print(sorted(f.__name__ for f in loaded.values()), heavy, "torch_npu" in sys.modules)
        """,
        env=entry_point_env,
    )
    assert out.split("\n")[0] == (
        "['npu_backend_entry', 'npugraph_ex_backend_entry', 'npugraphs_backend_entry'] [] True"
    )


def test_entry_point_path_first_then_setup_registers_no_duplicate(python, entry_point_env):
    """Dynamo looks ``npu`` up before torch_npu is imported: loading the entry point imports
    torch_npu, whose setup runs inside that load; Dynamo's own registration follows."""
    out = python(
        """
        import sys, torch, torch._dynamo
        from torch._dynamo import lookup_backend
        print("torch_npu" in sys.modules, [n for n in ("npu", "npugraph_ex", "npugraphs") if n in torch.compiler.list_backends()])
        fn = lookup_backend("npu")
        import torch_npu
        from torch_npu.compiler.backends import registry
        print(fn is registry.npu_backend_entry, lookup_backend("npugraphs") is registry.npugraphs_backend_entry,
              torch_npu._startup.compile_trigger.state().failed)
        x = torch.randn(8)
        print(torch.allclose(torch.compile(lambda t: t.cos() * 2, backend="npu")(x.npu()).cpu(), x.cos() * 2))
        """,
        env=entry_point_env,
    ).splitlines()
    assert out == ["False ['npu', 'npugraph_ex', 'npugraphs']", "True True ()", "True"]


BACKENDS_SESSION = """
import sys, torch, torch_npu
from torch_npu.compiler.backends import registry

def ours():
    return sorted(m for m in sys.modules if m.startswith("torch_npu.compiler.inductor"))

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
x = torch.randn(5, 8)

def run(module, inp):
    out = module(inp)
    out.sum().backward()
    grads = [p.grad.detach().cpu().clone() for p in module.parameters()]
    module.zero_grad()
    return out.detach().cpu(), grads

reference = run(model, x)
def custom(gm, example_inputs):
    return gm.forward

for backend in ["eager", "aot_eager", custom, "npu", "npugraph_ex", "npugraphs"]:
    torch._dynamo.reset()
    npu_model = torch.nn.Sequential(*[m for m in __import__("copy").deepcopy(model)]).npu()
    compiled = torch.compile(npu_model, backend=backend)
    for step in range(2):
        out, grads = run(compiled, x.npu())
    ok = torch.allclose(out, reference[0], atol=1e-5) and all(
        torch.allclose(a, b, atol=1e-5) for a, b in zip(grads, reference[1]))
    name = backend if isinstance(backend, str) else "custom"
    print(name, ok, ours() if name in ("eager", "aot_eager", "custom", "npu") else "")
"""


def test_backends_match_cpu_and_non_inductor_ones_never_load_our_inductor_layer(python):
    out = python(BACKENDS_SESSION).splitlines()
    assert out == [
        "eager True []",
        "aot_eager True []",
        "custom True []",
        "npu True []",
        "npugraph_ex True ",
        "npugraphs True ",
    ]


def test_reset_imports_no_unused_graph_module(python):
    out = python(
        """
        import sys, torch, torch_npu
        from torch._dynamo import lookup_backend
        for name in ("npu", "npugraph_ex", "npugraphs"):
            lookup_backend(name).reset()
        torch.compiler.reset()
        print(sorted(m for m in sys.modules if m.startswith(("torch_npu.compiler.graph_trees",
              "torch_npu.compiler.backends.npu", "npugraph_ex"))))
        """
    )
    assert out.strip() == "[]"


def test_npugraph_ex_backend_uses_replaced_optimize_fx_and_options():
    import torch

    import torch_npu  # noqa: F401  (installs the npugraph_ex finder)
    import npugraph_ex

    seen = []
    original = npugraph_ex.npu_fx_compiler._optimize_fx

    def spy(gm):
        seen.append(len(gm.graph.nodes))
        return original(gm)

    npugraph_ex.npu_fx_compiler._optimize_fx = spy
    try:
        torch._dynamo.reset()
        x = torch.randn(6)
        fn = torch.compile(lambda t: t.exp() - 1, backend="npugraph_ex", options={"capture": False})
        torch.testing.assert_close(fn(x.npu()).cpu(), x.exp() - 1)
        assert seen, "the replaced _optimize_fx was not called"
        torch._dynamo.reset()
        with pytest.raises(Exception, match="unknown option 'no_such_option'"):
            torch.compile(lambda t: t + 1, backend="npugraph_ex", options={"no_such_option": 1})(x.npu())
    finally:
        npugraph_ex.npu_fx_compiler._optimize_fx = original


def test_npu_backend_delegates_to_torchair_when_importable(python, tmp_path):
    package = tmp_path / "torchair"
    package.mkdir()
    (package / "__init__.py").write_text(
        "CALLS = []\n"
        "def get_npu_backend(compiler_config=None):\n"
        "    def backend(gm, example_inputs):\n"
        "        CALLS.append(len(example_inputs))\n"
        "        return gm.forward\n"
        "    return backend\n"
    )
    out = python(
        """
        import torch, torch_npu, torchair
        x = torch.randn(4)
        out = torch.compile(lambda t: t * 3, backend="npu")(x.npu())
        print(torch.allclose(out.cpu(), x * 3), torchair.CALLS)
        """,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert out.strip() == "True [1]"


def test_autoload_with_import_torch(python):
    if not any(ep.name == "torch_npu" for ep in entry_points(group="torch.backends")):
        pytest.skip("torch_npu is not pip-installed, so torch has no autoload entry point for it")
    out = python(
        """
        import sys, torch
        print("torch_npu" in sys.modules, "torch._dynamo" in sys.modules)
        x = torch.randn(4)
        print(torch.allclose(torch.compile(lambda t: t + 1, backend="npu")(x.npu()).cpu(), x + 1))
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"},
    )
    assert out.split() == ["True", "False", "True"]
