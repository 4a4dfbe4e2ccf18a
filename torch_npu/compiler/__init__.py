"""torch_npu's compiler integration: device interface, trace rules, backends, graph trees, Inductor.

Nothing here is imported by ``import torch_npu``: the setup steps of the compile trigger
(``torch_npu._startup``) import what they register after Dynamo has been imported, and
Dynamo imports ``backends.registry`` through the ``torch_dynamo_backends`` entry points. Importing this package itself imports nothing else, so those light entry modules
stay light.

``npugraph_mark_step_begin`` is the graph-tree step marker of ``torch_npu.npu``, reachable
here too; it is resolved on first access and imports no compiler module.
"""
from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "npugraph_mark_step_begin":
        from torch_npu.npu._graph_step_state import mark_step_begin

        return mark_step_begin
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
