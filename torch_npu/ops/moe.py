"""Mixture-of-experts routing as Ascend code calls it: ``npu_moe_gating_top_k_softmax`` and
``npu_moe_init_routing``.

``npu_moe_gating_top_k_softmax(x, finished, k)`` (Ascend documentation): ``softmax(x, -1)``
in float32, its ``k`` largest values ``y`` (in ``x``'s dtype) and their expert indices
(int32; ties go to the lower index), and ``row_idx[i, j] = j * rows + i``. Rows whose
``finished`` flag is set get the out-of-range expert index ``num_experts``, as in Ascend's
reference.

``npu_moe_init_routing(x, row_idx, expert_idx, active_num)`` (Ascend's equivalent code):
the ``rows * k`` (row, expert) pairs are sorted stably by expert; ``expanded_expert_idx`` is
the sorted experts, ``expanded_row_idx[p]`` is where pair ``p`` landed, and ``expanded_x``
gathers ``x[row % rows]`` for the first ``min(active_num, rows) * k`` sorted pairs.

Both are sorts and gathers rather than pointwise code, so Inductor calls them as they are.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_moe_gating_top_k_softmax", "npu_moe_init_routing"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

MAX_K = 1024


# --- npu_moe_gating_top_k_softmax ------------------------------------------------------------

def _check_gating_args(x, finished, k: int) -> None:
    op = "npu_moe_gating_top_k_softmax"
    check.tensor(op, "x", x)
    check.dtype(op, "x", x, check.FLOATING)
    check.rank(op, "x", x, (2, 3))
    experts = x.shape[-1]
    if not isinstance(k, int) or not 0 < k <= min(experts, MAX_K):
        raise ValueError(
            f"{op}: k={k!r} must be an int with 0 < k <= min(number of experts, {MAX_K}) "
            f"(x has {experts} experts in its last dimension)"
        )
    if finished is not None:
        check.tensor(op, "finished", finished)
        check.dtype(op, "finished", finished, (torch.bool,))
        if tuple(finished.shape) != tuple(x.shape[:-1]):
            raise ValueError(
                f"{op}: finished must have shape x.shape[:-1] = {tuple(x.shape[:-1])}, got "
                f"{tuple(finished.shape)}"
            )


def _gating_top_k_softmax(x, finished=None, k: int = 1):
    _check_gating_args(x, finished, k)
    experts = x.shape[-1]
    probs = torch.softmax(x.float(), dim=-1)
    values, indices = torch.sort(probs, dim=-1, descending=True, stable=True)
    y = values[..., :k].to(x.dtype).contiguous()
    expert_idx = indices[..., :k].to(torch.int32)
    if finished is not None:
        expert_idx = torch.where(finished.unsqueeze(-1), experts, expert_idx).to(torch.int32)
    rows = x.numel() // experts
    row_idx = torch.arange(rows * k, dtype=torch.int32, device=x.device).reshape(k, rows).t()
    row_idx = row_idx.reshape(*x.shape[:-1], k).contiguous()
    return y, expert_idx.contiguous(), row_idx


def _gating_top_k_softmax_fake(x, finished=None, k: int = 1):
    _check_gating_args(x, finished, k)
    shape = (*x.shape[:-1], k)
    return (
        x.new_empty(shape),
        x.new_empty(shape, dtype=torch.int32),
        x.new_empty(shape, dtype=torch.int32),
    )


_family.define(
    "npu_moe_gating_top_k_softmax(Tensor x, Tensor? finished=None, int k=1) "
    "-> (Tensor, Tensor, Tensor)",
    kernel=_gating_top_k_softmax,
    fake=_gating_top_k_softmax_fake,
)


# --- npu_moe_init_routing --------------------------------------------------------------------

def _check_routing_args(x, row_idx, expert_idx, active_num: int) -> None:
    op = "npu_moe_init_routing"
    check.tensor(op, "x", x)
    check.tensor(op, "row_idx", row_idx)
    check.tensor(op, "expert_idx", expert_idx)
    check.dtype(op, "x", x, check.FLOATING)
    check.dtype(op, "row_idx", row_idx, (torch.int32,))
    check.dtype(op, "expert_idx", expert_idx, (torch.int32,))
    check.rank(op, "x", x, (2,))
    check.rank(op, "expert_idx", expert_idx, (2,))
    if tuple(row_idx.shape) != tuple(expert_idx.shape):
        raise ValueError(
            f"{op}: row_idx must have the shape of expert_idx {tuple(expert_idx.shape)}, got "
            f"{tuple(row_idx.shape)}"
        )
    check.condition(
        expert_idx.shape[0] == x.shape[0],
        f"{op}: expert_idx has {expert_idx.shape[0]} rows but x has {x.shape[0]}; they must be "
        "equal (one row of k experts per token)",
    )
    if not isinstance(active_num, int) or active_num < 0:
        raise ValueError(f"{op}: active_num={active_num!r} must be a non-negative int")


def _init_routing(x, row_idx, expert_idx, active_num: int):
    _check_routing_args(x, row_idx, expert_idx, active_num)
    rows = x.shape[0]
    pairs = expert_idx.numel()
    sorted_experts, order = torch.sort(expert_idx.reshape(-1), stable=True)
    destination_to_source = row_idx.reshape(-1)[order].long()
    positions = torch.arange(pairs, dtype=torch.int32, device=x.device)
    expanded_row_idx = torch.zeros(pairs, dtype=torch.int32, device=x.device)
    expanded_row_idx = expanded_row_idx.scatter(0, destination_to_source, positions)
    active = min(active_num, rows) * expert_idx.shape[1]
    expanded_x = x[destination_to_source[:active] % rows].contiguous()
    return expanded_x, expanded_row_idx, sorted_experts.to(torch.int32).contiguous()


def _init_routing_fake(x, row_idx, expert_idx, active_num: int):
    _check_routing_args(x, row_idx, expert_idx, active_num)
    rows, hidden = x.shape
    k = expert_idx.shape[1]
    pairs = rows * k
    return (
        x.new_empty((min(active_num, rows) * k, hidden)),
        x.new_empty((pairs,), dtype=torch.int32),
        x.new_empty((pairs,), dtype=torch.int32),
    )


_family.define(
    "npu_moe_init_routing(Tensor x, Tensor row_idx, Tensor expert_idx, int active_num) "
    "-> (Tensor, Tensor, Tensor)",
    kernel=_init_routing,
    fake=_init_routing_fake,
)

npu_moe_gating_top_k_softmax = torch.ops.npu.npu_moe_gating_top_k_softmax
npu_moe_init_routing = torch.ops.npu.npu_moe_init_routing
