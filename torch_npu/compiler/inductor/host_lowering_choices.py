"""Where Inductor's lowering decides by device type, npu graphs get cpu's decision.

npu kernels are cpu's: Inductor's C++ kernels (``default``) or MLIR ones scheduled by
the same rules (``mlir``). Inductor's *lowering*, however, asks ``device.type == "cpu"``
in places and gives every other device the choice made for GPUs. Two of these change
results on npu, so npu's Inductor post-grad pass rewrites the graph to cpu's choice
before lowering:

* ``scatter_add`` / ``scatter_reduce(..., "sum")``: on cpu Inductor runs the eager kernel
  (``config.cpp.fallback_scatter_reduce_sum``); elsewhere it generates an atomic-add
  scatter, which torch 2.13's C++ code generator miscompiles once it tiles the loop (the
  inner tile index gets twice its stride: wrong values, writes out of bounds; cpu does the
  same with ``fallback_scatter_reduce_sum=False``). torchvision's max-pool backward is such
  a scatter (Inductor decomposes it into one), so every CNN trained with Inductor hit it.
  The node becomes an opaque op that runs the eager kernel, as on cpu.
* ``argmax`` / ``argmin`` over all dimensions of a permuted tensor: cpu's kernels compute
  logical indices, other devices' did not (npu returned memory-order indices). The input
  is given a contiguous layout first, so memory order is logical order.

And one that changes speed and rounding: ``var_mean`` (the statistics of layer, group and
batch norm), which Inductor computes in two passes (mean, then mean squared deviation) on
cpu for reductions of up to ``config.cpp.use_two_step_variance_threshold`` elements and
with a Welford reduction on other devices. For npu's C++ kernels Welford costs several
times the two passes at these sizes (the two layer norms of a small transformer block:
~12 µs against ~3 µs a call). A float32/float64 ``var_mean`` without correction, as the
norms compute it, becomes the two passes as aten ops, which Inductor lowers exactly as
cpu's two-step choice (the same ``mean`` lowering for both passes); with a correction or
another dtype it stays Welford.

And one choice Inductor has for no device but cpu, mps and Triton ones: FlexAttention's
higher-order ops become their dense aten composite (``flex_attention_dense``).

Convolutions get cpu's output layout and cpu's bias handling (``conv_host_layout``): the
npu kernel is cpu's, so its output needs no conversion to the layout FakeTensor's rule
gives the device, and the compiled results equal compiled cpu's.

``HostLoweringChoices`` is the npu ``device_custom_pass`` of ``register_backend_for_device``.
"""
from __future__ import annotations

import functools
import operator
from typing import Any

import torch

from torch._inductor.custom_graph_pass import CustomGraphPass

aten = torch.ops.aten
OP_NAMESPACE = "torch_npu"
_ARG_REDUCTIONS = (aten.argmax.default, aten.argmin.default)


@functools.cache
def _eager_scatter_ops() -> dict[Any, Any]:
    """The opaque ops the scatter nodes become (defined once, at registration): Inductor
    has no lowering for them, so it calls them, and they run the eager kernel."""

    @torch.library.custom_op(f"{OP_NAMESPACE}::eager_scatter_add", mutates_args=())
    def eager_scatter_add(self: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        return torch.scatter_add(self, dim, index, src)

    @eager_scatter_add.register_fake
    def _(self, dim, index, src):  # noqa: ANN001, ANN202
        return aten.scatter_add.default(self, dim, index, src)

    @torch.library.custom_op(f"{OP_NAMESPACE}::eager_scatter_reduce_sum", mutates_args=())
    def eager_scatter_reduce_sum(
        self: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor, include_self: bool
    ) -> torch.Tensor:
        return torch.scatter_reduce(self, dim, index, src, "sum", include_self=include_self)

    @eager_scatter_reduce_sum.register_fake
    def _(self, dim, index, src, include_self):  # noqa: ANN001, ANN202
        return aten.scatter_reduce.two(self, dim, index, src, "sum", include_self=include_self)

    return {aten.scatter_add.default: eager_scatter_add._opoverload,
            aten.scatter_reduce.two: eager_scatter_reduce_sum._opoverload}


def _cpu_runs_eager_scatter(self_val: torch.Tensor, src_val: Any) -> bool:
    """Inductor's own answer, asked for device cpu."""
    from torch._inductor.utils import use_scatter_fallback

    return use_scatter_fallback(
        aten.scatter_reduce_.two, "sum", self_val.dtype,
        src_val.dtype if isinstance(src_val, torch.Tensor) else type(src_val), "cpu",
        isinstance(src_val, torch.Tensor),
    )


def _is_npu(val: Any) -> bool:
    return isinstance(val, torch.Tensor) and val.device.type == "npu"


def _scatter_to_eager(node: torch.fx.Node) -> bool:
    if node.target is aten.scatter_add.default:
        self_node, dim, index, src = node.args
        extra: tuple = ()
    elif node.target is aten.scatter_reduce.two and node.args[4] == "sum":
        self_node, dim, index, src = node.args[:4]
        extra = (node.kwargs.get("include_self", True),)
    else:
        return False
    self_val = self_node.meta.get("val")
    src_val = src.meta.get("val") if isinstance(src, torch.fx.Node) else src
    if not _is_npu(self_val) or not _cpu_runs_eager_scatter(self_val, src_val):
        return False
    node.target = _eager_scatter_ops()[node.target]
    node.args = (self_node, dim, index, src, *extra)
    node.kwargs = {}
    return True


def _arg_reduction_over_contiguous_input(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
    if node.target not in _ARG_REDUCTIONS:
        return False
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    source = node.args[0]
    val = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
    if dim is not None or not _is_npu(val) or val.dim() < 2 or val.is_contiguous():
        return False
    from torch._inductor import inductor_prims
    from torch._prims_common import make_contiguous_strides_for

    with graph.inserting_before(node):
        contiguous = graph.call_function(
            inductor_prims.force_stride_order, (source, make_contiguous_strides_for(val.shape))
        )
    contiguous.meta["val"] = val.contiguous()
    node.replace_input_with(source, contiguous)
    return True


def _cpu_uses_two_step_variance(val: torch.Tensor, dims: list[int]) -> bool:
    """Inductor's two-step choice for a cpu input (``use_two_step_variance``), static shapes."""
    from torch._inductor import config as inductor_config

    shape = val.shape
    if not all(isinstance(d, int) for d in shape):
        return False
    reduced = 1
    kept = 1
    for i, size in enumerate(shape):
        if i in dims:
            reduced *= size
        else:
            kept *= size
    return reduced <= inductor_config.cpp.use_two_step_variance_threshold and kept != 1


def _var_mean_in_two_passes(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
    if node.target is not aten.var_mean.correction:
        return False
    source = node.args[0]
    val = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    correction = node.kwargs.get("correction")
    keepdim = node.kwargs.get("keepdim", False)
    if not _is_npu(val) or val.dtype not in (torch.float32, torch.float64) or dim is None or correction != 0:
        return False
    dims = sorted(d % val.dim() for d in dim) if val.dim() else []
    if not dims or not _cpu_uses_two_step_variance(val, dims):
        return False
    users = list(node.users)
    if not all(u.op == "call_function" and u.target is operator.getitem for u in users):
        return False

    def add(target: Any, *args: Any) -> torch.fx.Node:
        new = graph.call_function(target, args)
        new.meta["val"] = target(*(a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args))
        return new

    with graph.inserting_before(node):
        mean = add(aten.mean.dim, source, dims, True)
        deviation = add(aten.sub.Tensor, source, mean)
        var = add(aten.mean.dim, add(aten.square.default, deviation), dims, keepdim)
        if not keepdim:
            mean = add(aten.squeeze.dims, mean, dims)
    for user in users:
        user.replace_all_uses_with(var if user.args[1] == 0 else mean)
        graph.erase_node(user)
    graph.erase_node(node)
    return True


class HostLoweringChoices(CustomGraphPass):
    """npu's Inductor post-grad pass: cpu's lowering choices."""

    def __init__(self) -> None:
        super().__init__()
        # A graph loaded from the FX-graph cache calls the eager scatter ops without this
        # pass having run in the process, so they exist from registration on.
        _eager_scatter_ops()
        from . import conv_host_layout

        conv_host_layout.host_layout_op()

    def __call__(self, gm: torch.fx.GraphModule) -> None:
        # Not a lowering choice: the one post-grad hook of npu graphs also keeps, for the
        # NPU graph trees, their outputs' user stacks (see output_stack_traces) and what
        # blocks their capture (see capture_facts), read before the rewrites below.
        from . import capture_facts, conv_host_layout, flex_attention_dense, output_stack_traces

        output_stack_traces.note(gm)
        capture_facts.note(gm)
        changed = flex_attention_dense.densify(gm)
        changed |= conv_host_layout.rewrite_convolutions(gm)
        for node in list(gm.graph.nodes):
            if node.op != "call_function":
                continue
            changed |= (_scatter_to_eager(node) or _arg_reduction_over_contiguous_input(gm.graph, node)
                        or _var_mean_in_two_passes(gm.graph, node))
        if changed:
            gm.graph.lint()
            gm.recompile()

    def uuid(self) -> str:
        # The rewrites depend on this module's code only; the FX-graph cache key holds
        # the npu codegen version (a digest of these sources) as well.
        return "torch_npu.host_lowering_choices.v4"
