"""The package's imports run one way: from the package face down to the runtime.

Layers, top to bottom: the entry modules a user imports (``torch_npu`` itself and the
opt-in ``torch_npu.contrib.transfer_to_npu``), ``torch_npu._startup`` (what import sets up:
the compile trigger and its setup steps), ``torch_npu._patches``, ``torch_npu.compiler``,
then everything else (the device module, the runtime, ops, distributed, ...). A module may
import from its own layer or below. Every import counts, also inside functions and through
``importlib.import_module("...")`` with a literal name; the one upward import on purpose is
listed below with its reason. A bare ``import torch_npu`` is not an edge: the package is
always imported before any of its modules.
"""
from __future__ import annotations

import ast
import pathlib

PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[2] / "torch_npu"

ENTRY_MODULES = ("torch_npu", "torch_npu.contrib.transfer_to_npu")
LAYERS = ("_startup", "_patches", "compiler")  # top to bottom, under the entry modules

# (importer, imported) -> why the arrow points up.
UPWARD_ON_PURPOSE = {
    ("torch_npu.compiler.backends.registry", "torch_npu._startup.compile_trigger"):
        "a backend looked up before Dynamo's import finished must finish the setup first",
}


def layer_of(module: str) -> int:
    if module in ENTRY_MODULES:
        return 0
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return 1 + LAYERS.index(parts[1])
    return 1 + len(LAYERS)


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: pathlib.Path, module: str):
    """(imported torch_npu module, line) for every import in the file."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # ``from a import b`` imports a, and a.b when b is a module: count the deepest.
            names = [f"{source}.{alias.name}" for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        else:
            continue
        for name in names:
            if name.startswith("torch_npu.") and name != "torch_npu":
                yield name, node.lineno


def package_modules():
    bundled = PACKAGE_DIR / "dynamo" / "npugraph_ex"  # a standalone package, its own imports
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if bundled not in path.parents:
            yield path


def upward_imports():
    found = []
    for path in package_modules():
        module = module_name(path)
        for imported, line in imported_modules(path, module):
            if layer_of(imported) < layer_of(module):
                found.append((module, imported, line))
    return found


def test_no_module_imports_from_a_layer_above_it():
    unexpected = [
        f"{module}:{line} imports {imported}"
        for module, imported, line in upward_imports()
        if (module, imported) not in UPWARD_ON_PURPOSE
    ]
    assert unexpected == [], "\n".join(unexpected)


def test_the_compile_layer_reaches_the_runtime_only_through_the_device_module():
    # The compile shim must work over any runtime that registers npu through PrivateUse1:
    # what it needs of the runtime it asks torch.npu (torch_npu.npu), never torch_npu._C.
    direct = [
        f"{module}:{line} imports {imported}"
        for path in package_modules()
        for module in [module_name(path)]
        if module.startswith("torch_npu.compiler.")
        for imported, line in imported_modules(path, module)
        if imported == "torch_npu._C" or imported.startswith("torch_npu._C.")
    ]
    assert direct == [], "\n".join(direct)


def test_the_listed_upward_imports_still_exist():
    # A listed exception that is gone must leave the list, so the list stays the truth.
    present = {(module, imported) for module, imported, _ in upward_imports()}
    assert set(UPWARD_ON_PURPOSE) <= present, set(UPWARD_ON_PURPOSE) - present


def test_the_scanner_sees_imports_inside_functions_and_by_name(tmp_path):
    # The checks above are only as good as the scanner: feed it each import form.
    source = tmp_path / "probe.py"
    source.write_text(
        "import importlib\n"
        "from torch_npu._startup import compile_trigger\n"
        "def later():\n"
        "    from .. import _patches\n"
        "    importlib.import_module('torch_npu.compiler.inductor')\n"
    )
    found = {name for name, _ in imported_modules(source, "torch_npu.npu.probe")}
    assert found == {"torch_npu._startup.compile_trigger", "torch_npu._patches",
                     "torch_npu.compiler.inductor"}
    assert layer_of("torch_npu.npu.probe") > layer_of("torch_npu.compiler.inductor") > layer_of("torch_npu._patches")
