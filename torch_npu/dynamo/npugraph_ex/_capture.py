"""NPU-graph capture of the ATen graphs npugraph_ex has optimized.

``npu_fx_compiler`` runs ``_optimize_fx`` and hands the result here. ``capture_npu_graph``
returns the boxed callable AOT autograd expects: it warms the graph up once per input
signature, captures it as an NPU graph, then replays it. Parameters and buffers are static
inputs (captured at their address, never copied); other inputs are copied into the
graph's own input memory; graphs that cannot be captured (host syncs, cpu tensors,
data-dependent shapes) run eagerly. The recording machinery is the npu graph trees',
so npugraph_ex and ``backend="npugraphs"`` behave the same way.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

__all__ = ["capture_npu_graph", "reset"]


def _role(gm: torch.fx.GraphModule) -> str:
    # AOT autograd names placeholders by role: a backward takes "tangents_*", a training
    # forward "primals_*"; an inference graph has neither.
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    if any(name.startswith("tangents") for name in names):
        return "backward"
    if any(name.startswith("primals") for name in names):
        return "forward"
    return "inference"


def capture_npu_graph(
    gm: torch.fx.GraphModule, example_inputs: list[Any], config: Any = None
) -> Callable[[list[Any]], Any]:
    """The boxed callable that runs ``gm`` through NPU graphs.

    ``config`` is npugraph_ex's ``CompilerConfig`` (or None): ``capture=False`` runs the
    graph without capture; ``static_inputs=True`` treats every input as static, so callers
    must pass the same tensors (addresses) on every call for replays to be used.
    """
    from torch._dynamo.backends.debugging import boxed_nop

    model = boxed_nop(gm, example_inputs)
    if config is not None and not getattr(config, "capture", True):
        return model

    from torch_npu.compiler.graph_trees import CompilationMode
    from torch_npu.compiler.graph_trees.wrap import aot_num_user_outputs, aot_static_input_indices, npugraphify

    role = _role(gm)
    if role == "backward":
        mode, static, num_user_outputs = CompilationMode.BACKWARD, set(), None
    elif role == "forward":
        mode = CompilationMode.FORWARD
        static = aot_static_input_indices() or set()
        num_user_outputs = aot_num_user_outputs()
    else:
        mode, static, num_user_outputs = CompilationMode.INFERENCE, aot_static_input_indices() or set(), None
    gm._npugraphs_name = "npugraph_ex"
    return npugraphify(
        gm,
        example_inputs,
        model,
        mode=mode,
        static_input_idxs=static,
        num_user_outputs=num_user_outputs,
        all_inputs_static=bool(getattr(config, "static_inputs", False)),
    )


def reset() -> None:
    """Free the NPU graphs captured so far."""
    import sys

    trees = sys.modules.get("torch_npu.compiler.graph_trees.tree_manager")
    if trees is not None:
        trees.reset_graph_trees()
