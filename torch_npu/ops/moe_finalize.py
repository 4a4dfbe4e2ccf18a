"""The last steps of mixture-of-experts routing as Ascend code calls them:
``npu_moe_compute_expert_tokens`` (where each expert's rows end) and
``npu_moe_finalize_routing`` (combining the experts' outputs back into token order).

Semantics (Ascend documentation, which gives a NumPy reference for the second):

* ``npu_moe_compute_expert_tokens(sorted_experts, num_experts)``: for each expert ``e``, the
  number of entries of the non-decreasing ``sorted_experts`` that are ``<= e`` (the end of
  its rows, found by binary search); int32 like the input.
* ``npu_moe_finalize_routing(expanded_permuted_rows, skip1, skip2, bias, scales,
  expanded_src_to_dst_row, expert_for_source_row, drop_pad_mode)``:
  ``out[i] = skip1[i] + skip2[i] + sum_k scales[i, k] * (rows[dst(i, k)] + bias[expert[i, k]])``
  with ``dst(i, k) = expanded_src_to_dst_row[k * num_rows + i]`` (``drop_pad_mode`` 0 and 1,
  column order) or ``[i * K + k]`` (2 and 3, row order); in the drop modes (1, 3) the rows
  are ``(E, C, H)`` and a ``dst`` of -1 (a dropped token) reads a row of zeros (its bias
  still counts, as in Ascend's reference). Missing skips,
  bias or scales (``None``) drop their terms (scales: weight 1, ``K = 1``).

Arithmetic is float32, rounded once to the rows' dtype.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_moe_compute_expert_tokens", "npu_moe_finalize_routing"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

MAX_EXPERTS = 2048


# --- npu_moe_compute_expert_tokens ---------------------------------------------------------

def _check_expert_tokens_args(sorted_experts, num_experts) -> None:
    op = "npu_moe_compute_expert_tokens"
    check.tensor(op, "sorted_expert_for_source_row", sorted_experts)
    check.dtype(op, "sorted_expert_for_source_row", sorted_experts, (torch.int32,))
    check.rank(op, "sorted_expert_for_source_row", sorted_experts, (1,))
    if not 0 < num_experts <= MAX_EXPERTS:
        raise ValueError(f"{op}: num_expert={num_experts} must be in (0, {MAX_EXPERTS}]")


def _expert_tokens(sorted_expert_for_source_row, num_expert: int):
    _check_expert_tokens_args(sorted_expert_for_source_row, num_expert)
    experts = torch.arange(num_expert, dtype=torch.int32, device=sorted_expert_for_source_row.device)
    ends = torch.searchsorted(sorted_expert_for_source_row, experts, right=True)
    return ends.to(torch.int32)


def _expert_tokens_fake(sorted_expert_for_source_row, num_expert: int):
    _check_expert_tokens_args(sorted_expert_for_source_row, num_expert)
    return sorted_expert_for_source_row.new_empty((num_expert,))


_family.define(
    "npu_moe_compute_expert_tokens(Tensor sorted_expert_for_source_row, int num_expert) -> Tensor",
    kernel=_expert_tokens, fake=_expert_tokens_fake,
)


def npu_moe_compute_expert_tokens(sorted_experts, num_experts=1):
    """``torch.ops.npu.npu_moe_compute_expert_tokens`` under the Python signature Ascend exports."""
    return torch.ops.npu.npu_moe_compute_expert_tokens(sorted_experts, num_experts)


# --- npu_moe_finalize_routing --------------------------------------------------------------

def _check_finalize_args(rows, skip1, skip2, bias, scales, src_to_dst, experts, drop_pad_mode, k):
    op = "npu_moe_finalize_routing"
    check.tensor(op, "expanded_permuted_rows", rows)
    check.tensor(op, "expanded_src_to_dst_row", src_to_dst)
    check.dtype(op, "expanded_permuted_rows", rows, check.FLOATING)
    check.dtype(op, "expanded_src_to_dst_row", src_to_dst, (torch.int32, torch.int64))
    check.choice(op, "drop_pad_mode", drop_pad_mode, (0, 1, 2, 3))
    check.rank(op, "expanded_src_to_dst_row", src_to_dst, (1,))
    check.rank(op, "expanded_permuted_rows", rows, (3,) if drop_pad_mode in (1, 3) else (2,))
    top_k = scales.shape[1] if scales is not None else (k or 1)
    pairs = src_to_dst.shape[0]
    if pairs % top_k:
        raise ValueError(f"{op}: expanded_src_to_dst_row has {pairs} entries, not a multiple of K={top_k}")
    num_rows, hidden = pairs // top_k, rows.shape[-1]
    if skip1 is None and skip2 is not None:
        raise ValueError(f"{op}: skip2 is given without skip1; when skip1 is None skip2 must be None too")
    for name, value in (("skip1", skip1), ("skip2", skip2)):
        if value is not None:
            check.tensor(op, name, value)
            check.same_dtype(op, name, value, "expanded_permuted_rows", rows)
            if tuple(value.shape) != (num_rows, hidden):
                raise ValueError(f"{op}: {name} must have shape ({num_rows}, {hidden}), got {tuple(value.shape)}")
    if scales is not None:
        check.tensor(op, "scales", scales)
        check.rank(op, "scales", scales, (2,))
        if scales.shape[0] != num_rows:
            raise ValueError(f"{op}: scales must have shape ({num_rows}, K), got {tuple(scales.shape)}")
    if bias is not None:
        check.tensor(op, "bias", bias)
        if bias.dim() != 2 or bias.shape[1] != hidden:
            raise ValueError(f"{op}: bias must have shape (E, {hidden}), got {tuple(bias.shape)}")
        if experts is None:
            raise ValueError(f"{op}: bias needs expert_for_source_row (the expert of each (row, k) pair)")
    if experts is not None:
        check.tensor(op, "expert_for_source_row", experts)
        if tuple(experts.shape) != (num_rows, top_k):
            raise ValueError(f"{op}: expert_for_source_row must have shape ({num_rows}, {top_k}), got {tuple(experts.shape)}")
    return num_rows, top_k, hidden


def _finalize_routing(expanded_permuted_rows, skip1, skip2, bias, scales, expanded_src_to_dst_row,
                      expert_for_source_row, drop_pad_mode=0, k=1):
    num_rows, top_k, hidden = _check_finalize_args(
        expanded_permuted_rows, skip1, skip2, bias, scales, expanded_src_to_dst_row, expert_for_source_row,
        drop_pad_mode, k)
    rows = expanded_permuted_rows.reshape(-1, hidden).float()
    dst = expanded_src_to_dst_row.long()
    dst = dst.reshape(top_k, num_rows).t() if drop_pad_mode in (0, 1) else dst.reshape(num_rows, top_k)
    dropped = dst < 0
    picked = rows[dst.clamp_min(0)]  # (num_rows, K, H)
    picked = torch.where(dropped.unsqueeze(-1), torch.zeros_like(picked), picked)
    if bias is not None:
        picked = picked + bias.float()[expert_for_source_row.long()]
    weights = scales.float() if scales is not None else picked.new_ones((num_rows, top_k))
    out = (weights.unsqueeze(-1) * picked).sum(dim=1)
    for skip in (skip1, skip2):
        if skip is not None:
            out = out + skip.float()
    return out.to(expanded_permuted_rows.dtype)


def _finalize_routing_fake(expanded_permuted_rows, skip1, skip2, bias, scales, expanded_src_to_dst_row,
                           expert_for_source_row, drop_pad_mode=0, k=1):
    num_rows, _top_k, hidden = _check_finalize_args(
        expanded_permuted_rows, skip1, skip2, bias, scales, expanded_src_to_dst_row, expert_for_source_row,
        drop_pad_mode, k)
    return expanded_permuted_rows.new_empty((num_rows, hidden))


_family.define(
    "npu_moe_finalize_routing(Tensor expanded_permuted_rows, Tensor? skip1, Tensor? skip2, Tensor? bias, "
    "Tensor? scales, Tensor expanded_src_to_dst_row, Tensor? expert_for_source_row, int? drop_pad_mode=0, "
    "int? k=1) -> Tensor",
    kernel=_finalize_routing, fake=_finalize_routing_fake,
)


def npu_moe_finalize_routing(expanded_permuted_rows, skip1, skip2, bias, scales, expanded_src_to_dst_row,
                             export_for_source_row, drop_pad_mode=0):
    """``torch.ops.npu.npu_moe_finalize_routing`` under the Python signature Ascend exports."""
    return torch.ops.npu.npu_moe_finalize_routing(
        expanded_permuted_rows, skip1, skip2, bias, scales, expanded_src_to_dst_row, export_for_source_row,
        drop_pad_mode,
    )
