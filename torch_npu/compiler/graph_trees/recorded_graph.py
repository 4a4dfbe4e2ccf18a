"""One captured NPU graph of one compiled function, for one input signature.

Inputs come in two kinds. *Borrowed* inputs (parameters, buffers, and tensors that are
outputs of other recorded graphs) are captured at their own address and never copied, so
a replay is only valid while the caller passes tensors at those same addresses
(``matches``). All other tensor inputs are copied into placeholders the graph owns.

Outputs come in two kinds too. Values the caller keeps (user outputs, gradients) are
cloned out of the graph's memory, so they stay valid however often the graph replays.
Tensors a forward saves for its backward are handed out as aliases of graph memory (no
copy): the backward graph then borrows them. If they are still alive when this graph is
about to overwrite them, they are moved to fresh memory first (``release``), so a
pending backward still sees its own forward's values.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import torch
from torch.npu.graphs import _data_ptrs_equal


def _placeholder_like(x: torch.Tensor) -> torch.Tensor:
    # Same strides when the layout is a plain permutation of dense memory (the graph may
    # rely on them, e.g. for view ops); expanded or gappy inputs get a dense copy, since
    # copying into overlapping memory is not allowed.
    if torch._prims_common.is_non_overlapping_and_dense_or_false(x):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


class RecordedGraph:
    """A captured graph with its placeholders and static outputs; see the module docstring."""

    def __init__(
        self,
        graph: Any,
        placeholders: list[Any],
        borrowed_idxs: tuple[int, ...],
        copied_idxs: tuple[int, ...],
        writeback_idxs: tuple[int, ...],
        static_outputs: list[Any],
        num_cloned_outputs: int,
    ):
        self.graph = graph
        self.placeholders = placeholders
        self.borrowed_idxs = borrowed_idxs
        self.borrowed_ptrs = tuple(placeholders[i].data_ptr() for i in borrowed_idxs)
        self._borrowed_idx_list = list(borrowed_idxs)
        self._borrowed_ptr_list = list(self.borrowed_ptrs)
        self.copied_idxs = copied_idxs
        self.writeback_idxs = writeback_idxs
        self.static_outputs = static_outputs
        self.num_cloned_outputs = num_cloned_outputs
        # Aliases of saved outputs handed out by the last run, and the step it ran in.
        self._aliases: list[weakref.ref] = []
        self.last_step = -1

    @classmethod
    def record(
        cls,
        fn: Callable[[list[Any]], Any],
        args: list[Any],
        *,
        is_borrowed: Callable[[int, Any], bool],
        mutated_idxs: set[int],
        num_cloned_outputs: int | None,
        stream: torch.Stream,
        pool: int | None,
    ) -> "RecordedGraph":
        """Capture ``fn`` on ``args``'s signature; the result has not run yet.

        Raises whatever the capture raises (a host sync, a data-dependent shape); the
        runtime has then already closed the capture.
        """
        placeholders: list[Any] = []
        borrowed: list[int] = []
        copied: list[int] = []
        with torch.no_grad():
            for i, a in enumerate(args):
                if not isinstance(a, torch.Tensor):
                    placeholders.append(a)
                elif is_borrowed(i, a):
                    # A new tensor object on the same memory: holding the caller's own
                    # object (say, an activation alias) would keep it alive forever.
                    placeholders.append(a.detach())
                    borrowed.append(i)
                else:
                    p = _placeholder_like(a)
                    p.copy_(a)
                    placeholders.append(p)
                    copied.append(i)

        graph = torch.npu.NPUGraph()
        current = torch.npu.current_stream()
        stream.wait_stream(current)
        with torch.npu.graph(graph, pool=pool, stream=stream):
            # A boxed callee may clear its argument list: give it a copy.
            outputs = fn(list(placeholders))
        current.wait_stream(stream)

        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        n_cloned = len(outputs) if num_cloned_outputs is None else min(num_cloned_outputs, len(outputs))
        return cls(
            graph,
            placeholders,
            tuple(borrowed),
            tuple(copied),
            tuple(i for i in copied if i in mutated_idxs),
            outputs,
            n_cloned,
        )

    def matches(self, args: list[Any]) -> bool:
        """True if every borrowed input is passed at the address it was captured at."""
        return _data_ptrs_equal(args, self._borrowed_idx_list, self._borrowed_ptr_list)

    def has_live_aliases(self) -> bool:
        """True if tensors saved for a backward by the last run are still referenced."""
        return any(ref() is not None for ref in self._aliases)

    def release(self) -> None:
        """Move still-referenced saved-output aliases off graph memory before it is overwritten."""
        if not self._aliases:
            return
        with torch.no_grad():
            for ref in self._aliases:
                t = ref()
                if t is not None:
                    # ``.data`` swaps the storage of this very tensor object, which is the
                    # one autograd saved, so the pending backward reads the copy.
                    t.data = t.clone()
        self._aliases = []

    def run(self, args: list[Any], step: int) -> list[Any]:
        """Replay on ``args`` (``matches(args)`` must hold) and return the outputs."""
        self.release()
        with torch.no_grad():
            for i in self.copied_idxs:
                src = args[i]
                dst = self.placeholders[i]
                if src.data_ptr() != dst.data_ptr():
                    # Aliases of this placeholder handed out before were moved off it by
                    # release(), but still share its version counter (detach() shares
                    # it): refilling graph memory must not look like a modification of
                    # the tensors a pending backward saved.
                    with torch.autograd._unsafe_preserve_version_counter(dst):
                        dst.copy_(src)
            self.graph.replay()
            for i in self.writeback_idxs:
                args[i].copy_(self.placeholders[i])
        self.last_step = step
        return self._outputs()

    def _outputs(self) -> list[Any]:
        out: list[Any] = []
        aliases: list[weakref.ref] = []
        with torch.no_grad():
            for i, o in enumerate(self.static_outputs):
                if not isinstance(o, torch.Tensor):
                    out.append(o)
                elif i < self.num_cloned_outputs:
                    out.append(o.clone())
                else:
                    alias = o.detach()
                    aliases.append(weakref.ref(alias))
                    out.append(alias)
        self._aliases = aliases
        return out

    def output_storage_ptrs(self) -> list[int]:
        """Data pointers of the storages of the tensor outputs (graph-owned memory)."""
        return [
            o.untyped_storage().data_ptr() for o in self.static_outputs if isinstance(o, torch.Tensor)
        ]

    def reset(self) -> None:
        """Free the graph's memory; aliases still referenced are moved off it first."""
        self.release()
        self.graph.reset()
        self.placeholders = []
        self.static_outputs = []
