"""Finds the private PyTorch names a Python source depends on, with ``ast``.

A name is private when a component of its dotted path below ``torch`` starts with ``_``
(dunders such as ``__doc__`` do not count). Three forms are seen: ``import torch._x``,
``from torch._x import y`` (also ``from torch import _C``), and attribute chains rooted at
the name ``torch`` or at a name one of those imports bound in the same file
(``from torch._inductor import config`` then ``config._config``). ``getattr``/``hasattr``/
``setattr`` with a literal name count as an attribute. Names built at run time are not seen.
The operators of our own ``npu`` namespace (``torch.ops.npu._x``) are ours, not PyTorch's.
"""
from __future__ import annotations

import ast
import os

OWN_PREFIXES = ("torch.ops.npu.",)
_ATTR_BUILTINS = ("getattr", "hasattr", "setattr", "delattr")


def is_private(dotted: str) -> bool:
    parts = dotted.split(".")
    return (
        parts[0] == "torch"
        and not dotted.startswith(OWN_PREFIXES)
        and any(p.startswith("_") and not p.endswith("__") for p in parts[1:])
    )


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    root = "torch" if node.id == "torch" else aliases.get(node.id)
    if root is None:
        return None
    return ".".join([root, *reversed(parts)])


def uses_in_source(source: str, filename: str = "<source>") -> dict[str, int]:
    """``{private dotted name: first line}`` for one source file."""
    if "torch" not in source:
        return {}
    tree = ast.parse(source, filename)
    uses: dict[str, int] = {}
    aliases: dict[str, str] = {}
    attributes: list[ast.Attribute] = []
    inner: set[int] = set()
    calls: list[ast.Call] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "torch":
                    continue
                if alias.asname:
                    aliases[alias.asname] = alias.name
                if is_private(alias.name):
                    uses.setdefault(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level or not node.module or node.module.split(".")[0] != "torch":
                continue
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                aliases[alias.asname or alias.name] = full
                if is_private(full):
                    uses.setdefault(full, node.lineno)
        elif isinstance(node, ast.Attribute):
            attributes.append(node)
            inner.add(id(node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ATTR_BUILTINS:
            calls.append(node)
    aliases.pop("torch", None)
    for node in attributes:
        if id(node) not in inner:
            dotted = _dotted(node, aliases)
            if dotted and is_private(dotted):
                uses.setdefault(dotted, node.lineno)
    for node in calls:
        if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            base = _dotted(node.args[0], aliases)
            if base and is_private(f"{base}.{node.args[1].value}"):
                uses.setdefault(f"{base}.{node.args[1].value}", node.lineno)
    return uses


def uses_in_tree(root: str) -> dict[str, list[str]]:
    """``{private dotted name: ["path:line", ...]}`` for every ``.py`` file under ``root``."""
    found: dict[str, list[str]] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("csrc", "__pycache__"))
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    source = f.read()
                for dotted, line in uses_in_source(source, path).items():
                    found.setdefault(dotted, []).append(f"{os.path.relpath(path, root)}:{line}")
    return found
