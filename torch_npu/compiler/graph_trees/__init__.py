"""NPU graph trees: warm-up, record and replay of compiled ATen graphs on the npu device.

``npugraphify`` wraps one AOT-compiled graph; ``reset`` frees every recorded graph. The
``npugraphs`` backend (``torch_npu.compiler.backends.npugraphs``), npugraph_ex capture and
``mode="reduce-overhead"`` build on these; the trees import none of them. Names load on
first use (PEP 562), so importing one submodule does not load the trees.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any

# Public name -> submodule that defines it.
_NAMES = {
    "CompilationMode": "tree_manager",
    "GraphFunction": "tree_manager",
    "TreeManager": "tree_manager",
    "get_manager": "tree_manager",
    "managers": "tree_manager",
    "reset_graph_trees": "tree_manager",
    "npugraphify": "wrap",
}

__all__ = [*_NAMES, "reset"]


def __getattr__(name: str) -> Any:
    submodule = _NAMES.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value


def reset() -> None:
    """Free every recorded NPU graph; trees that were never loaded have nothing to free."""
    trees = sys.modules.get(f"{__name__}.tree_manager")
    if trees is not None:
        trees.reset_graph_trees()
