"""reduce_scatter_tensor_uneven / all_gather_into_tensor_uneven: collectives whose ranks hold
different numbers of rows.

Rank ``r`` owns ``split_sizes[r]`` rows (dim 0) of the full tensor. Both are built from the
even collectives of any backend: each rank's rows are padded to the largest split, the
even ``reduce_scatter_tensor``/``all_gather_into_tensor`` runs on the padded buffers, and
the rows are copied out (padding rows never reach a result). With ``async_op=True`` the
copy runs in the returned work's ``wait()``, after the collective.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["all_gather_into_tensor_uneven", "reduce_scatter_tensor_uneven"]


def _splits(split_sizes, total_rows: int, world: int, what: str) -> list[int]:
    if split_sizes is None:
        if total_rows % world:
            raise ValueError(f"{what}: {total_rows} rows do not split evenly over {world} ranks; pass the split sizes")
        return [total_rows // world] * world
    splits = [int(s) for s in split_sizes]
    if len(splits) != world or any(s < 0 for s in splits):
        raise ValueError(f"{what}: need {world} non-negative split sizes (one per rank), got {list(split_sizes)}")
    if sum(splits) != total_rows:
        raise ValueError(f"{what}: split sizes {splits} add up to {sum(splits)}, but the tensor has {total_rows} rows")
    return splits


class _CopyOutWork(dist.Work):
    """The padded collective's work, whose ``wait`` also copies the rows out (once)."""

    def __init__(self, inner, copy_out):
        super().__init__()
        self._inner = inner
        self._copy_out = copy_out
        self._done = False

    def wait(self, timeout=None):
        if not self._done:
            if timeout is None:
                self._inner.wait()
            else:
                self._inner.wait(timeout)
            self._copy_out()
            self._done = True
        return True

    def is_completed(self):
        return self._done

    def is_success(self):
        return self._done


def _finish(work, copy_out, async_op):
    if not async_op:
        work.wait()
        copy_out()
        return None
    return _CopyOutWork(work, copy_out)


def reduce_scatter_tensor_uneven(output, input, input_split_sizes=None, op=dist.ReduceOp.SUM, group=None,
                                 async_op=False):
    """Reduces ``input`` over the ranks and leaves rank ``r`` rows ``input_split_sizes[r]`` of the result."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    what = "reduce_scatter_tensor_uneven"
    splits = _splits(input_split_sizes, input.size(0), world, what)
    if output.size(0) != splits[rank] or output.shape[1:] != input.shape[1:]:
        raise ValueError(f"{what}: rank {rank}'s output must have shape {[splits[rank], *input.shape[1:]]}, "
                         f"got {list(output.shape)}")
    longest = max(splits)
    padded = input.new_zeros((world * longest, *input.shape[1:]))
    start = 0
    for r, n in enumerate(splits):
        padded[r * longest:r * longest + n].copy_(input[start:start + n])
        start += n
    received = output.new_empty((longest, *output.shape[1:]))
    reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    work = reduce_scatter(received, padded, op=op, group=group, async_op=True)
    return _finish(work, lambda: output.copy_(received[:splits[rank]]), async_op)


def all_gather_into_tensor_uneven(output, input, output_split_sizes=None, group=None, async_op=False):
    """Concatenates (dim 0) every rank's ``input`` into ``output``; rank ``r`` gives ``output_split_sizes[r]`` rows."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    what = "all_gather_into_tensor_uneven"
    splits = _splits(output_split_sizes, output.size(0), world, what)
    if input.size(0) != splits[rank] or output.shape[1:] != input.shape[1:]:
        raise ValueError(f"{what}: rank {rank}'s input must have shape {[splits[rank], *output.shape[1:]]}, "
                         f"got {list(input.shape)}")
    longest = max(splits)
    padded = input.new_zeros((longest, *input.shape[1:]))
    padded[:splits[rank]].copy_(input)
    gathered = output.new_empty((world * longest, *output.shape[1:]))
    work = dist.all_gather_into_tensor(gathered, padded, group=group, async_op=True)

    def copy_out():
        start = 0
        for r, n in enumerate(splits):
            output[start:start + n].copy_(gathered[r * longest:r * longest + n])
            start += n

    return _finish(work, copy_out, async_op)
