"""``backend="npugraphs"``: AOT autograd, then NPU graph trees.

Dynamo hands the backend a graph; AOT autograd splits it into forward and backward (or
one inference) ATen graphs, each run op by op on the device and wrapped in a
``GraphFunction`` of the NPU graph trees, which warms it up, records it as an NPU graph
and replays it. Parameters and buffers are static inputs; a backward borrows the
activations its forward left in graph memory. Input mutations are applied by AOT
autograd outside the graphs, so replays never write to caller tensors behind its back.

The backend takes no ``options=``: there is nothing to tune, and silently ignoring them
would hide a typo, so they are rejected when Dynamo first calls the backend.
"""
from __future__ import annotations

import functools
import itertools
from typing import Any

import torch

__all__ = ["npugraphs", "reset"]

# mode="reduce-overhead" is what this backend does; "default" means nothing.
_ACCEPTED_MODES = (None, "default", "reduce-overhead")
_graph_ids = itertools.count()


def _check_kwargs(kwargs: dict[str, Any]) -> None:
    options = kwargs.pop("options", None)
    if options is not None:
        raise ValueError(
            "backend='npugraphs' takes no options, but got "
            f"options={options!r}. Remove options= (NPU graph trees need no configuration), "
            "or use backend='inductor' with options."
        )
    mode = kwargs.pop("mode", None)
    if mode not in _ACCEPTED_MODES:
        raise ValueError(
            f"backend='npugraphs' does not support mode={mode!r}; use mode=None or 'reduce-overhead'"
        )
    if kwargs:
        raise TypeError(f"backend='npugraphs' got unexpected arguments {sorted(kwargs)}")


def npugraphs(gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Any:
    """Compile ``gm`` with AOT autograd whose graphs run through NPU graph trees."""
    _check_kwargs(dict(kwargs))

    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.backends.debugging import boxed_nop

    from torch_npu.compiler.graph_trees import CompilationMode
    from torch_npu.compiler.graph_trees.wrap import (
        aot_num_user_outputs,
        aot_static_input_indices,
        npugraphify,
    )

    num_dynamo_inputs = len(example_inputs)
    graph_id = next(_graph_ids)

    def compile_graph(aot_gm: torch.fx.GraphModule, aot_inputs: list[Any], mode: CompilationMode) -> Any:
        model = boxed_nop(aot_gm, aot_inputs)
        if mode is CompilationMode.BACKWARD:
            static: set[int] = set()
            num_user_outputs = None
        else:
            static = aot_static_input_indices() or set()
            # Parameters AOT lifted itself (modules not inlined) lead the inputs.
            static |= set(range(max(0, len(aot_inputs) - num_dynamo_inputs)))
            num_user_outputs = aot_num_user_outputs() if mode is CompilationMode.FORWARD else None
        aot_gm._npugraphs_name = f"#{graph_id}"
        return npugraphify(
            aot_gm,
            aot_inputs,
            model,
            mode=mode,
            static_input_idxs=static,
            num_user_outputs=num_user_outputs,
        )

    backend = aot_autograd(
        fw_compiler=functools.partial(compile_graph, mode=CompilationMode.FORWARD),
        bw_compiler=functools.partial(compile_graph, mode=CompilationMode.BACKWARD),
        inference_compiler=functools.partial(compile_graph, mode=CompilationMode.INFERENCE),
        keep_inference_input_mutations=False,
    )
    return backend(gm, example_inputs)


def reset() -> None:
    """Free every recorded NPU graph; the graph-tree modules load only if they were used."""
    import sys

    trees = sys.modules.get("torch_npu.compiler.graph_trees.tree_manager")
    if trees is not None:
        trees.reset_graph_trees()
