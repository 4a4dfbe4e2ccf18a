"""Turning one AOT-compiled ATen graph into a ``GraphFunction`` of the right device tree.

Kept apart from the trees so both the ``npugraphs`` backend and npugraph_ex capture
decide the same way which inputs are static and whether a graph can be captured.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from .graph_facts import graph_capture_blocker, graph_device_index, graph_devices, mutated_input_indices
from .tree_manager import CompilationMode, GraphFunction, get_manager


def aot_static_input_indices() -> set[int] | None:
    """Indices of parameters/buffers among the inputs of the graph AOT is compiling now."""
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None) if context is not None else None
    indices = getattr(metadata, "static_input_indices", None)
    return set(indices) if indices is not None else None


def aot_num_user_outputs() -> int | None:
    """How many leading forward outputs are user-visible (the rest are saved for backward)."""
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None) if context is not None else None
    if metadata is None:
        return None
    return metadata.tensors_saved_for_backwards_slice.start


def output_stack_traces(gm: torch.fx.GraphModule) -> list[str | None]:
    """Per output of ``gm``, the user's stack where it was produced (None when unknown)."""
    output = next((n for n in reversed(gm.graph.nodes) if n.op == "output"), None)
    if output is None:
        return []
    values = output.args[0] if isinstance(output.args[0], (list, tuple)) else (output.args[0],)
    return [v.meta.get("stack_trace") if isinstance(v, torch.fx.Node) else None for v in values]


def npugraphify(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    model: Callable[[list[Any]], Any],
    *,
    mode: CompilationMode,
    static_input_idxs: set[int] = frozenset(),
    num_user_outputs: int | None = None,
    all_inputs_static: bool = False,
) -> Callable[[list[Any]], Any]:
    """Wrap ``model`` (the boxed runner of ``gm``) so it runs through NPU graphs.

    ``static_input_idxs`` are inputs at fixed addresses (parameters, buffers) that are
    borrowed rather than copied. Graphs that cannot be captured run ``model`` eagerly.
    """
    if not graph_devices(gm) and not any(isinstance(x, torch.Tensor) for x in example_inputs):
        # No tensor work at all (say, only stream bookkeeping): nothing to capture.
        return model
    reason = graph_capture_blocker(gm, example_inputs)
    device_index = 0 if reason is not None else graph_device_index(gm, example_inputs)
    return GraphFunction(
        get_manager(device_index),
        model,
        mode=mode,
        static_input_idxs=set(static_input_idxs),
        mutated_input_idxs=mutated_input_indices(gm),
        num_user_outputs=num_user_outputs,
        name=getattr(gm, "_npugraphs_name", type(gm).__name__),
        disabled_reason=reason,
        all_inputs_static=all_inputs_static,
        stack_traces=output_stack_traces(gm),
    )
