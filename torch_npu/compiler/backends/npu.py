"""``backend="npu"``: graph mode on the npu without Inductor.

When a ``torchair`` package is importable, graph mode is torchair's and this backend hands
the graph to it. Otherwise the Dynamo graph goes through AOT autograd with the npu
decompositions, and the resulting ATen forward and backward graphs run op by op on the
device. Nothing here imports Inductor's codegen or our Inductor layer.
"""
from __future__ import annotations

import importlib.util
from typing import Any

import torch

from torch_npu.compiler.backends.aot_npu import aot_npu


def npu(gm: torch.fx.GraphModule, example_inputs: list[Any], options: dict | None = None):  # noqa: ANN201
    if importlib.util.find_spec("torchair") is not None:
        import torchair

        return torchair.get_npu_backend()(gm, example_inputs)
    if options:
        raise ValueError(
            f"backend='npu' takes no options without torchair installed; got {sorted(options)}"
        )
    return aot_npu(gm, example_inputs)
