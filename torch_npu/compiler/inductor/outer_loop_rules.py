"""Keeps a row-only pointwise node out of an outer-loop fusion it would break, for npu's C++ kernels.

Inductor's C++ scheduler fuses nodes that share an outer loop (a row reduction and the
element-wise node that consumes it: one loop over the rows, the reduction and the
element-wise loop inside it, each row read from memory once). At code generation it checks
that every member's outer loop has the same step; if one does not, the *whole* group falls
back to one loop nest per node.

A pointwise node over the rows only (a norm's ``rstd = rsqrt(sum / n + eps)``, shape
``[rows, 1]``) has no loop inside the outer one, so it is vectorised along the rows (step 16
where the row reduction steps by 1). Fusion accepts it and code generation then drops the
group: ``npu_rms_norm`` returning ``(y, rstd)`` became three loop nests that read ``x`` from
memory twice (0.62x the eager time, where the fused loop gives 0.4x).

``breaks_outer_loop`` predicts that case: one side of the pair is such a row-only node and
the other has loops inside the outer loop that are vectorised there (its innermost variable
walks memory contiguously). The scheduling refuses the pair; the row-only node becomes its
own small loop nest in the same kernel, and the rest stays fused. Where the other side is
vectorised along the outer variable too (a column reduction), the steps match and the
fusion is kept.
"""
from __future__ import annotations

from typing import Any

import sympy
from torch._inductor.dependencies import MemoryDep


def _members(node: Any) -> list[Any]:
    """The scheduler nodes of ``node`` (outer-loop fused nodes flattened)."""
    outer = getattr(node, "get_outer_nodes", None)
    groups = outer() if callable(outer) else [node]
    return [snode for group in groups for snode in group.get_nodes()]


def _ranges(snode: Any) -> tuple[tuple, tuple]:
    _, (vars_, reduce) = snode.group
    return tuple(vars_), tuple(reduce)


def _is_row_only(snode: Any, depth: int) -> bool:
    vars_, reduce = _ranges(snode)
    return not snode.is_reduction() and reduce == () and len(vars_) <= depth


def _vectorised_inside(snode: Any, depth: int) -> bool:
    """``snode`` has loops inside the outer ``depth`` ones and its innermost one is contiguous."""
    vars_, reduce = _ranges(snode)
    if len(vars_) + len(reduce) <= depth:
        return False
    for dep in snode.read_writes.reads_and_writes():
        if not isinstance(dep, MemoryDep) or dep.num_vars <= depth:
            continue
        innermost = dep.var_names[-1]
        if sympy.expand(dep.index).coeff(innermost) == 1:
            return True
    return False


def breaks_outer_loop(node1: Any, node2: Any, depth: int) -> bool:
    """Fusing ``node1`` and ``node2`` by their ``depth`` outer loops would make the group fall back."""
    if depth < 1:
        return False
    members1, members2 = _members(node1), _members(node2)
    for row_side, other_side in ((members1, members2), (members2, members1)):
        if any(_is_row_only(s, depth) for s in row_side) and any(
            _vectorised_inside(s, depth) for s in other_side
        ):
            return True
    return False
