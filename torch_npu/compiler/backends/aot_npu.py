"""AOT autograd for the npu: decompositions, then the ATen graphs run op by op.

Shared by ``backend="npu"`` (without torchair) and by ``backend="npugraphs"`` when no NPU
graph trees are available. Backward activation kernels are decomposed into the pointwise
expressions they are defined by, so backward graphs use only ops the device runs natively
(and that a graph capture records one by one); forward ops stay whole.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch

_aten = torch.ops.aten

DECOMPOSED_OPS = (
    _aten.gelu_backward,
    _aten.sigmoid_backward,
    _aten.silu_backward,
    _aten.tanh_backward,
    _aten.threshold_backward,
)


@functools.cache
def npu_decompositions() -> dict[Any, Callable[..., Any]]:
    from torch._decomp import get_decompositions

    return get_decompositions(list(DECOMPOSED_OPS))


def run_aten_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """AOT compiler that runs the graph as it is (boxed calling convention)."""
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(gm.forward)


def aot_npu(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    from torch._dynamo.backends.common import aot_autograd

    backend = aot_autograd(
        fw_compiler=run_aten_graph,
        bw_compiler=run_aten_graph,
        decompositions=npu_decompositions(),
        keep_inference_input_mutations=True,
    )
    return backend(gm, example_inputs)
