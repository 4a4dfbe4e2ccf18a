"""Convolutions in compiled npu graphs: cpu's layout and cpu's bias handling.

npu's convolution is the CPU kernel run on npu memory, but Inductor plans an npu
``aten.convolution`` as a device that is not cpu:

* its output strides come from FakeTensor's rule, which asks ATen's backend rule for the
  device: for npu (ATen's ``Overrideable`` backend) contiguous, where the CPU kernel writes
  channels-last for the channels-last inputs Inductor gives it. npu's eager convolution
  honours the rule, so every compiled npu convolution paid a conversion of its output;
* the bias is peeled off into the following kernel ("cudnn is slower with it"), where cpu
  passes it to the kernel: a different sum order, results differing from compiled cpu in
  the last bits.

npu's post-grad pass therefore replaces each npu ``aten.convolution`` by the runtime's
``npu::_convolution_host_layout`` (the same CPU kernel, output left in the layout it
writes, bias passed in), with inputs in the layout Inductor's convolution lowering gives cpu
graphs: channels-last for 2-d convolutions when cpu graphs get the layout optimization
(mkldnn), otherwise the stride order of cpu's output. The op's fake kernel asks
FakeTensor's cpu rule for the output strides. Inductor calls it as an extern kernel with
exactly those strides, so the generated code is cpu's, call for call.

Left as they were: convolutions with symbolic sizes or unbatched inputs, and the backward
(``aten.convolution_backward``). A runtime without the op gets no rewrite.
"""
from __future__ import annotations

import functools
from typing import Any, Optional

import torch

aten = torch.ops.aten
HOST_LAYOUT_OP_NAME = "_convolution_host_layout"
# Inductor's NHWC stride order: each dimension's rank by stride, N C H W.
CHANNELS_LAST_ORDER = [3, 0, 2, 1]
_CONV_ARGS = ("input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups")


def _cpu_twin(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """A cpu tensor of ``t``'s geometry (fake, under the fake mode in use)."""
    if t is None:
        return None
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu")


def _host_layout_fake(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):  # noqa: ANN001, ANN202
    out = aten.convolution.default(_cpu_twin(input), _cpu_twin(weight), _cpu_twin(bias), stride, padding, dilation,
                                   transposed, output_padding, groups)
    return torch.empty_strided(out.shape, out.stride(), dtype=out.dtype, device=input.device)


@functools.cache
def host_layout_op() -> Any:
    """The runtime's convolution in cpu's layout, with its fake kernel; None when the runtime
    does not define it."""
    if not hasattr(torch.ops.npu, HOST_LAYOUT_OP_NAME):
        return None
    torch.library.register_fake(f"npu::{HOST_LAYOUT_OP_NAME}", _host_layout_fake)
    return getattr(torch.ops.npu, HOST_LAYOUT_OP_NAME).default


def _cpu_gets_layout_optimization() -> bool:
    """Whether Inductor gives a cpu graph with convolutions the channels-last layout
    optimization (``GraphLowering.decide_layout_opt``: always, with mkldnn)."""
    from torch._inductor import config

    if not config.layout_optimization:
        return False
    return config.force_layout_optimization or (torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available())


def _stride_order(strides: tuple[int, ...]) -> list[int]:
    """Each dimension's rank by stride, smallest first, an inner dimension before an outer one
    of equal stride (as Inductor's ``get_stride_order`` ranks them)."""
    ranked = list(reversed(sorted(range(len(strides)), key=lambda i: strides[i], reverse=True)))
    order = [0] * len(strides)
    for rank, dim in enumerate(ranked):
        order[dim] = rank
    return order


def _dense_strides(shape: tuple[int, ...], order: list[int]) -> list[int]:
    strides = [0] * len(shape)
    step = 1
    for dim in sorted(range(len(shape)), key=lambda i: order[i]):
        strides[dim] = step
        step *= max(shape[dim], 1)
    return strides


def _static(val: Any) -> bool:
    return isinstance(val, torch.Tensor) and all(isinstance(s, int) for s in (*val.shape, *val.stride()))


def _in_order(graph: torch.fx.Graph, node: torch.fx.Node, before: torch.fx.Node, order: list[int]) -> torch.fx.Node:
    """``node``, or a copy of it with dense strides in ``order`` when its strides are in
    another one (what Inductor's ``require_stride_order`` does for cpu's convolution)."""
    from torch._inductor import inductor_prims

    val = node.meta["val"]
    if _stride_order(tuple(val.stride())) == order:
        return node
    strides = _dense_strides(tuple(val.shape), order)
    with graph.inserting_before(before):
        copy = graph.call_function(inductor_prims.force_stride_order, (node, strides))
    copy.meta["val"] = val.new_empty_strided(val.shape, strides)
    return copy


def _rewrite(gm: torch.fx.GraphModule, node: torch.fx.Node, op: Any, channels_last_2d: bool) -> bool:
    from torch.fx.operator_schemas import normalize_function

    normalized = normalize_function(node.target, node.args, node.kwargs, normalize_to_only_use_kwargs=True)
    if normalized is None:
        return False
    args = normalized.kwargs
    x, weight, bias = args["input"], args["weight"], args["bias"]
    val = node.meta.get("val")
    vals = [n.meta.get("val") if isinstance(n, torch.fx.Node) else None for n in (x, weight, bias)]
    if not (isinstance(val, torch.Tensor) and val.device.type == "npu") or not isinstance(x, torch.fx.Node):
        return False
    if not all(_static(v) for v in (val, vals[0], vals[1])) or vals[0].dim() != vals[1].dim():
        return False
    if bias is not None and not isinstance(bias, torch.fx.Node):
        return False
    graph = gm.graph
    conv_args = [args[name] for name in _CONV_ARGS[3:]]
    if channels_last_2d and vals[1].dim() == 4:
        order = CHANNELS_LAST_ORDER
    else:
        with _fake_mode_of(vals[0]):
            order = _stride_order(tuple(_host_layout_fake(*vals, *conv_args).stride()))
    x = _in_order(graph, x, node, order)
    weight = _in_order(graph, weight, node, order)
    with graph.inserting_before(node):
        new = graph.call_function(op, (x, weight, bias, *conv_args))
    new.meta.update(node.meta)
    with _fake_mode_of(vals[0]):
        new.meta["val"] = op(x.meta["val"], weight.meta["val"], vals[2], *conv_args)
    node.replace_all_uses_with(new)
    graph.erase_node(node)
    _keep_output_strides(graph, new, val)
    return True


def _keep_output_strides(graph: torch.fx.Graph, new: torch.fx.Node, eager_val: torch.Tensor) -> None:
    """A graph output keeps the stride order eager npu gives it (its strides, but for those
    of size-1 dimensions): the output use reads a copy in that order when cpu's differs."""
    from torch._inductor import inductor_prims

    if tuple(new.meta["val"].stride()) == tuple(eager_val.stride()):
        return
    for user in list(new.users):
        if user.op != "output":
            continue
        with graph.inserting_after(new):
            kept = graph.call_function(inductor_prims.force_stride_order, (new, list(eager_val.stride())))
        kept.meta["val"] = eager_val
        user.replace_input_with(new, kept)


def _fake_mode_of(val: torch.Tensor) -> Any:
    from torch._dynamo.utils import detect_fake_mode

    return detect_fake_mode([val])


def rewrite_convolutions(gm: torch.fx.GraphModule) -> bool:
    """Replace ``gm``'s npu convolutions by the runtime's cpu-layout convolution; True if
    any was replaced."""
    convs = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is aten.convolution.default]
    if not convs:
        return False
    op = host_layout_op()
    if op is None:
        return False
    channels_last_2d = _cpu_gets_layout_optimization()
    changed = False
    for node in convs:
        changed |= _rewrite(gm, node, op, channels_last_2d)
    return changed
