"""NPU graph trees: warm-up, record and replay of compiled ATen graphs on the npu device.

``npugraphify`` wraps one AOT-compiled graph; ``reset`` frees every recorded graph. The
``npugraphs`` backend (``torch_npu.compiler.npugraphs_backend``) builds on these; this
package is imported only when that backend or npugraph_ex capture first runs.
"""
from __future__ import annotations

from typing import Any

import torch

from .tree_manager import (
    CompilationMode,
    GraphFunction,
    TreeManager,
    get_manager,
    managers,
    reset_graph_trees,
)
from .wrap import npugraphify

__all__ = [
    "CompilationMode",
    "GraphFunction",
    "TreeManager",
    "get_manager",
    "managers",
    "npugraphify",
    "npugraphs",
    "reset",
    "reset_graph_trees",
]


def npugraphs(gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Any:
    """The ``npugraphs`` backend; see ``torch_npu.compiler.npugraphs_backend``."""
    from torch_npu.compiler.npugraphs_backend import npugraphs_backend

    return npugraphs_backend(gm, example_inputs, **kwargs)


def reset() -> None:
    """Free every recorded NPU graph (what ``torch.compiler.reset()`` reaches)."""
    reset_graph_trees()
