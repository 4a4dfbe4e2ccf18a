"""How Dynamo treats ``torch.npu`` functions it meets while tracing.

Code outside torch's own folder is inlined by default, which is right for most of
``torch.npu``: ``current_device``, ``is_available`` and ``synchronize`` are written over
``torch.accelerator``, which Dynamo folds (with a guard) or traces. What must not be
inlined is listed here:

- ``torch.npu.stream``: kept in the graph as a function call, so Dynamo's handler for
  device-interface stream functions (keyed on ``NpuInterface.stream``, the same object)
  turns ``with torch.npu.stream(s)`` into a real stream context in the graph.
"""
from __future__ import annotations

import torch

# Functions of torch.npu kept whole in the graph rather than inlined.
ALLOWED_IN_GRAPH = ("stream",)


def register() -> None:
    for name in ALLOWED_IN_GRAPH:
        torch.compiler.allow_in_graph(getattr(torch.npu, name))
