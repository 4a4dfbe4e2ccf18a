"""fast_gelu_pass: replaces ``aten::gelu`` in TorchScript graphs by ``npu::npu_fast_gelu``.

Ascend's fast GELU, ``x * sigmoid(1.702 x)``, is a cheaper approximation of GELU that the
card runs as one kernel; the pass trades GELU's exact numbers for it, as on Ascend. The
rewrite is TorchScript's subgraph rewriter over every graph of the module and its
submodules.
"""
from __future__ import annotations

import torch

__all__ = ["fast_gelu_pass"]

GELU_PATTERN = """
graph(%x, %approximate):
    %r = aten::gelu(%x, %approximate)
    return (%r)"""

# The operator the pass rewrites to ("namespace::name", one Tensor in, one out).
FAST_GELU_OP = "npu::npu_fast_gelu"


def _replacement(op: str) -> str:
    return f"""
graph(%x, %approximate):
    %r = {op}(%x)
    return (%r)"""


def _op_exists(op: str) -> bool:
    namespace, _, name = op.partition("::")
    return hasattr(getattr(torch.ops, namespace), name)


def _graphs(jit_mod):
    if isinstance(jit_mod, torch.jit.ScriptFunction):
        yield jit_mod.graph
        return
    for module in jit_mod.modules():
        script_object = getattr(module, "_c", None)
        if script_object is None:
            continue
        for name in script_object._method_names():
            yield script_object._get_method(name).graph


def fast_gelu_pass(jit_mod):
    """Rewrites every ``aten::gelu`` of ``jit_mod``'s graphs into ``npu::npu_fast_gelu`` in place."""
    op = FAST_GELU_OP
    if not _op_exists(op):
        raise RuntimeError(f"fast_gelu_pass needs the {op} operator, which this torch_npu build does not register")
    replacement = _replacement(op)
    for graph in _graphs(jit_mod):
        torch._C._jit_pass_custom_pattern_based_rewrite_graph(GELU_PATTERN, replacement, graph)
    return jit_mod
