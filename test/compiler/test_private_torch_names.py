"""Every private PyTorch name torch_npu's Python code uses is in the one table
(``torch_npu/_private_torch_names.py``), and every name in the table exists in the
installed torch. The doc page is the table rendered.

The resolution runs in a fresh interpreter: it imports ``torch._dynamo``, ``torch._inductor``
and ``torch.testing._internal``, which the rest of the session must not inherit.
"""
from __future__ import annotations

import functools
import json
import os

import pytest
from private_names_scan import is_private, uses_in_source, uses_in_tree

from torch_npu import _private_torch_names as table

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(REPO_ROOT, "torch_npu")

RESOLVE = """
import importlib, json
from torch_npu._private_torch_names import names

def resolve(dotted):
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj

def missing(candidates):
    out = []
    for name in candidates:
        try:
            resolve(name)
        except AttributeError:
            out.append(name)
    return out

# The second list shows the check can fail: a name that does not exist.
print(json.dumps([missing(names()), missing(["torch._C._no_such_binding", "torch._inductor.config._no_such"])]))
"""


@functools.cache
def package_uses() -> dict[str, list[str]]:
    return uses_in_tree(PACKAGE)


def covered(use: str, listed: set[str]) -> bool:
    """``use`` is a listed name, or a public attribute chain below one."""
    if use in listed:
        return True
    parts = use.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        if ".".join(parts[:cut]) in listed:
            return not is_private("torch." + ".".join(parts[cut:]))
    return False


def test_every_listed_name_resolves_in_the_installed_torch(python):
    missing, bogus = json.loads(python(RESOLVE, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}).strip().splitlines()[-1])
    assert bogus == ["torch._C._no_such_binding", "torch._inductor.config._no_such"]
    assert missing == [], f"private torch names that moved or vanished: {missing}"


def test_every_private_name_used_is_listed():
    uses = package_uses()
    listed = set(table.names())
    unlisted = {use: sites for use, sites in uses.items() if not covered(use, listed)}
    assert unlisted == {}, "private torch names used but not in torch_npu/_private_torch_names.py:\n" + "\n".join(
        f"  {use}  ({', '.join(sites)})" for use, sites in sorted(unlisted.items()))
    assert len(uses) > 100  # the scanner sees the package, not an empty folder


def test_no_listed_name_is_unused():
    # A row outliving its last use would make the table a wish list.
    uses = set(package_uses())
    prefixes = {".".join(u.split(".")[:cut]) for u in uses for cut in range(2, u.count(".") + 2)}
    assert sorted(set(table.names()) - prefixes) == []


def test_rows_are_complete_and_names_unique():
    names = table.names()
    assert len(names) == len(set(names))
    for row in table.ROWS:
        assert row.names and row.why.strip() and row.breaks.strip(), row
        assert all(is_private(name) for name in row.names), row.names


def test_the_doc_is_the_table_rendered():
    with open(os.path.join(REPO_ROOT, "docs", "private_torch_names.md"), encoding="utf-8") as f:
        assert f.read() == table.render_markdown(), "regenerate docs/private_torch_names.md from render_markdown()"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import torch._dynamo", {"torch._dynamo"}),
        ("import torch._inductor.config as c\nc._config", {"torch._inductor.config", "torch._inductor.config._config"}),
        ("from torch._x import y, z as w", {"torch._x.y", "torch._x.z"}),
        ("from torch import _C", {"torch._C"}),
        ("from torch import nn\nnn.Linear", set()),
        ("import torch\ntorch._C._foo(1).bar", {"torch._C._foo"}),
        ("import torch\ntorch.Tensor._make_wrapper_subclass", {"torch.Tensor._make_wrapper_subclass"}),
        ("import torch\ntorch.__version__; torch.ops.npu._own_op", set()),
        ("import torch.distributed as dist\ndist.distributed_c10d._world.pg_names",
         {"torch.distributed.distributed_c10d._world.pg_names"}),
        ("import torch\nhasattr(torch._C, '_cuda_x')", {"torch._C", "torch._C._cuda_x"}),
        ("from torch_npu import _C\n_C._npu_thing; other._C._x", set()),
        ("from . import _private\n_private.x", set()),
    ],
)
def test_the_scanner_sees_imports_and_chains_rooted_at_torch(source, expected):
    assert set(uses_in_source(source)) == expected


def test_an_unlisted_use_is_reported():
    listed = set(table.names())
    use = next(iter(uses_in_source("import torch\ntorch._C._not_in_the_table()")))
    assert not covered(use, listed)
    assert covered("torch._guards.TracingContext.try_get", listed)
    assert not covered("torch._C._autograd._profiler_enabled", {"torch._C"})
