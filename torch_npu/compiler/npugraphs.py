"""``backend="npugraphs"``: AOT autograd whose graphs run through NPU graph trees.

The implementation is ``torch_npu.compiler.npugraphs_backend`` (AOT autograd + the graph
trees of ``torch_npu.compiler.graph_trees``), imported when the backend is first called;
it provides ``npugraphs_backend(gm, example_inputs, **kwargs)`` and ``reset()``. A build
that does not ship it runs the same AOT autograd graphs without NPU graphs, so results
are the same, only replay is missing.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any

import torch

IMPLEMENTATION = "torch_npu.compiler.npugraphs_backend"


def _implementation():  # noqa: ANN202
    try:
        return importlib.import_module(IMPLEMENTATION)
    except ModuleNotFoundError as exc:
        if exc.name != IMPLEMENTATION:
            raise
        return None


def npugraphs(gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any):  # noqa: ANN201
    implementation = _implementation()
    if implementation is not None:
        return implementation.npugraphs_backend(gm, example_inputs, **kwargs)
    if kwargs.get("options"):
        raise ValueError(f"backend='npugraphs' takes no options; got {sorted(kwargs['options'])}")
    from torch_npu.compiler.backends.aot_npu import aot_npu

    return aot_npu(gm, example_inputs)


def reset() -> None:
    # Graph trees that were never used are never imported just to be reset.
    implementation = sys.modules.get(IMPLEMENTATION)
    if implementation is not None:
        implementation.reset()
