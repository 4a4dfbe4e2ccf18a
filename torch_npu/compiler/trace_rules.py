"""How Dynamo treats ``torch.npu`` functions it meets while tracing.

Code outside torch's own folder is inlined by default, which is right for most of
``torch.npu``: ``current_device``, ``is_available`` and ``synchronize`` are written over
``torch.accelerator``, which Dynamo folds (with a guard) or traces. Two kinds of functions
must not be inlined:

- ``torch.npu.stream`` is kept in the graph as a function call (``allow_in_graph``), so
  Dynamo's handler for device-interface stream functions (keyed on
  ``NpuInterface.stream``, the same object) turns ``with torch.npu.stream(s)`` into a
  real stream context in the graph.
- Static device descriptions (properties, count) end in a runtime call that Dynamo cannot
  trace. They are constant for the process, so ``substitute_in_graph`` with constant
  folding makes Dynamo call them at trace time, with constant arguments, and put the
  value in the graph, as it does for ``torch.cuda.get_device_properties``. The value
  type, ``torch.npu.NpuDeviceProperties`` (frozen), joins Dynamo's immutable constant
  types, as ``torch.cuda._CudaDeviceProperties`` is there, so the folded value is a
  constant whose fields read as constants.
"""
from __future__ import annotations

from typing import Any

import torch

# Functions of torch.npu kept whole in the graph rather than inlined.
ALLOWED_IN_GRAPH = ("stream",)

# Functions of torch.npu folded to their value at trace time.
CONSTANT_FOLDED = ("get_device_properties", "get_device_name", "get_device_capability", "device_count")


def _folded(name: str):  # noqa: ANN202
    original = getattr(torch.npu, name)

    # Only called when some argument is not a constant: then the call stays opaque.
    def traceable(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    traceable.__name__ = f"npu_{name}"
    return original, traceable


def register() -> None:
    for name in ALLOWED_IN_GRAPH:
        torch.compiler.allow_in_graph(getattr(torch.npu, name))
    from torch._dynamo.utils import common_constant_types

    common_constant_types.add(torch.npu.NpuDeviceProperties)
    for name in CONSTANT_FOLDED:
        original, traceable = _folded(name)
        torch.compiler.substitute_in_graph(original, can_constant_fold_through=True)(traceable)
