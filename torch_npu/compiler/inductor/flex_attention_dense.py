"""FlexAttention under Inductor on npu: the higher-order ops become their dense composite.

Inductor lowers ``flex_attention`` and ``flex_attention_backward`` with a kernel template
chosen by device type: cpu's C++ template (forward only), mps's Metal one, and Triton for
every other device, npu included (which has no Triton). npu's kernels are host C++, so
before lowering, npu's post-grad pass replaces each such node on npu by the aten graph of
the op's own dense implementation (``sdpa_dense`` / ``sdpa_dense_backward``, the kernels
eager runs), traced on the node's fake values with Inductor's decompositions. Inductor then
fuses and generates C++ kernels for it like any other graph; forward and backward both
work, where cpu's template has no backward.

The dense form materialises the (batch, heads, q_len, kv_len) score matrix, as eager does,
where a fused kernel would not: the first rewrite in a process says so once (a
``UserWarning``). Block sparsity is not exploited: the block mask's ``mask_mod`` is
evaluated over the whole matrix.
"""
from __future__ import annotations

import copy
import inspect
import operator
import threading
import warnings
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

DEVICE_TYPE = "npu"
DENSE_FORM_WARNING = (
    "torch.compile on npu runs FlexAttention in its dense form: Inductor generates C++ kernels "
    "for the composite eager runs, which materialises the full (batch, heads, q_len, kv_len) "
    "score matrix and does not skip masked blocks (there is no fused flex attention kernel "
    "for npu). Memory grows with q_len * kv_len."
)

_warned = threading.Event()


def _dense_implementations() -> dict[Any, Callable[..., Any]]:
    from torch._higher_order_ops.flex_attention import (
        flex_attention,
        flex_attention_backward,
        sdpa_dense,
        sdpa_dense_backward,
    )

    return {flex_attention: sdpa_dense, flex_attention_backward: sdpa_dense_backward}


def _on_npu(node: torch.fx.Node) -> bool:
    query = node.args[0]
    val = query.meta.get("val") if isinstance(query, torch.fx.Node) else None
    return isinstance(val, torch.Tensor) and val.device.type == DEVICE_TYPE


def _trace_dense(gm: torch.fx.GraphModule, node: torch.fx.Node, dense: Callable[..., Any]):  # noqa: ANN202
    """The aten graph of ``dense`` applied to ``node``'s arguments, and the graph nodes
    that feed its placeholders, in order."""
    from torch._dynamo.utils import detect_fake_mode
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    leaves, spec = pytree.tree_flatten((node.args, node.kwargs))
    inputs: list[torch.fx.Node] = []
    slots: list[int] = []
    constants = list(leaves)
    for index, leaf in enumerate(leaves):
        if not isinstance(leaf, torch.fx.Node):
            continue
        if leaf.op == "get_attr":  # score_mod, mask_mod and their joint graphs
            constants[index] = _batchable(getattr(gm, leaf.target))
        else:
            inputs.append(leaf)
            slots.append(index)

    # The dense backward computes a captured buffer's gradient only for a buffer that
    # requires grad; the post-grad graph's values no longer say which do, its uses do.
    wanted = _buffers_needing_grad(node, dense)
    needs_grad = [leaf in wanted for leaf in inputs]

    def call_dense(*values: Any) -> Any:
        filled = list(constants)
        for slot, value in zip(slots, values):
            filled[slot] = value
        args, kwargs = pytree.tree_unflatten(filled, spec)
        return dense(*args, **kwargs)

    values = [leaf.meta["val"] for leaf in inputs]
    fake_mode = detect_fake_mode(values)
    with fake_mode:
        values = [value.detach().requires_grad_() if grad else value for value, grad in zip(values, needs_grad)]
        traced = make_fx(call_dense, select_decomp_table(), tracing_mode="real")(*values)
    return traced, inputs


def _batchable(subgraph: Any) -> Any:
    """``subgraph`` with its dtype conversions as ``aten._to_copy``, which vmap batches.

    The dense implementations vmap the score and mask graphs over (b, h, q, kv). Inductor's
    decompositions left ``prims.convert_element_type`` in them (a score_mod under autocast
    has one), which has no batching rule: vmap's fallback then runs it once per score, a
    Python loop over b*h*q*kv under tracing.
    """
    if not isinstance(subgraph, torch.fx.GraphModule):
        return subgraph
    convert = torch.ops.prims.convert_element_type.default
    if not any(n.op == "call_function" and n.target is convert for n in subgraph.graph.nodes):
        return subgraph
    graph = copy.deepcopy(subgraph.graph)
    for n in graph.nodes:
        if n.op == "call_function" and n.target is convert:
            source, dtype = n.args
            n.target = torch.ops.aten._to_copy.default
            n.args, n.kwargs = (source,), {"dtype": dtype}
    return torch.fx.GraphModule(subgraph, graph)


def _buffers_needing_grad(node: torch.fx.Node, dense: Callable[..., Any]) -> set[torch.fx.Node]:
    """The captured score_mod buffers whose gradient the backward node's users read."""
    bound = inspect.signature(dense).bind(*node.args, **node.kwargs)
    buffers = bound.arguments.get("score_mod_other_buffers")
    grads = [user for user in node.users if user.args[1:] == (3,)] if "fw_graph" in bound.arguments else []
    wanted: set[torch.fx.Node] = set()
    for grads_node in grads:
        for user in grads_node.users:
            buffer = buffers[user.args[1]]
            if user.users and isinstance(buffer, torch.fx.Node):
                wanted.add(buffer)
    return wanted


def _inline(gm: torch.fx.GraphModule, node: torch.fx.Node, traced: torch.fx.GraphModule,
            inputs: list[torch.fx.Node]) -> Any:
    """Copy ``traced`` into ``gm`` before ``node``; returns its outputs (graph nodes)."""
    graph = gm.graph
    env: dict[torch.fx.Node, Any] = {}
    placeholders = iter(inputs)
    outputs: Any = None
    with graph.inserting_before(node):
        for inner in traced.graph.nodes:
            if inner.op == "placeholder":
                env[inner] = next(placeholders)
            elif inner.op == "get_attr":  # tensor constants make_fx lifted (scalars: Inductor inlines them)
                name = _unique_attr(gm, f"_flex_dense_{inner.target}")
                gm.register_buffer(name, getattr(traced, inner.target))
                copied = graph.get_attr(name)
                copied.meta.update(inner.meta)
                env[inner] = copied
            elif inner.op == "output":
                outputs = torch.fx.map_arg(inner.args[0], env.__getitem__)
            else:
                copied = graph.node_copy(inner, env.__getitem__)
                copied.meta.setdefault("stack_trace", node.meta.get("stack_trace"))
                env[inner] = copied
    return outputs


def _unique_attr(gm: torch.fx.GraphModule, base: str) -> str:
    name, suffix = base, 0
    while hasattr(gm, name):
        suffix += 1
        name = f"{base}_{suffix}"
    return name


def _replace_uses(node: torch.fx.Node, outputs: Any) -> None:
    """Point every ``node[i]`` (and ``node[i][j]``) at the inlined outputs."""
    for user in list(node.users):
        if user.op != "call_function" or user.target is not operator.getitem:
            raise RuntimeError(f"npu flex attention rewrite: unexpected use of {node} by {user.format_node()}")
        value = outputs[user.args[1]]
        if isinstance(value, torch.fx.Node):
            user.replace_all_uses_with(value)
        else:  # a nested tuple (gradients of captured buffers)
            _replace_uses(user, value)
        user.graph.erase_node(user)


def _warn_once() -> None:
    if not _warned.is_set():
        _warned.set()
        warnings.warn(DENSE_FORM_WARNING, UserWarning, stacklevel=2)


def densify(gm: torch.fx.GraphModule) -> bool:
    """Replace every flex attention node on npu by its dense aten graph; True if any was."""
    dense_of = _dense_implementations()
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in dense_of and _on_npu(n)]
    for node in nodes:
        traced, inputs = _trace_dense(gm, node, dense_of[node.target])
        outputs = _inline(gm, node, traced, inputs)
        _replace_uses(node, outputs)
        gm.graph.erase_node(node)
    if nodes:
        gm.graph.eliminate_dead_code()
        gm.delete_all_unused_submodules()
        _warn_once()
    return bool(nodes)
