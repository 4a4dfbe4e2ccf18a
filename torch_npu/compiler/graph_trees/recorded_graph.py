"""One captured NPU graph of one compiled function, for one input signature.

Inputs come in two kinds. *Borrowed* inputs (parameters, buffers, and tensors that are
outputs of other recorded graphs) are captured at their own address and never copied, so
a replay is only valid while the caller passes tensors at those same addresses
(``matches``). All other tensor inputs are copied into placeholders the graph owns.

Outputs are the graph's static outputs, handed out in place as CUDA graph trees do: tensor
objects over storages of their own that share the graph's memory (and keep it alive), so
nothing is copied. A replay hands out the objects of the last one again when nobody holds
them or their memory any more (their autograd state and hooks cleared), and new ones
otherwise. What the caller holds stays valid until the graph replays again; before a
replay overwrites that memory, what is still held is

* *invalidated* if it is a user output (or a gradient): any later read of its data raises
  an error naming the output, the graph and the fix, like CUDA's "accessing tensor output
  of CUDAGraphs that has been overwritten by a subsequent run";
* *moved* to fresh memory if it is a tensor a forward saved for its backward (or
  ``move_all`` is asked for), so a pending backward still sees its own forward's values.

Whether the replay may go ahead at all (a new step) or a sibling graph must be recorded
(same step, or activations still waiting for their backward) is the tree's decision.
Outputs that are borrowed inputs (a parameter saved for the backward) are handed out as
they are; those that are copied inputs live in the graph's placeholders and are treated
as graph memory.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from torch_npu.npu import _graph_replay

OVERWRITTEN = (
    "Error: accessing tensor output of NPU graphs that has been overwritten by a subsequent run "
    "({what}). To prevent overwriting, clone the tensor outside of torch.compile() or call "
    "torch_npu.npu.mark_step_begin() (torch.compiler.npugraph_mark_step_begin) before each model "
    "invocation. Stack trace of where it was produced: {stack}"
)
OVERWRITTEN_GRAD = (
    "Error: accessing gradient tensor output of NPU graphs that has been overwritten by a "
    "subsequent run ({what}). This can happen with torch.compile(mode='reduce-overhead') and "
    "gradient accumulation when a .grad tensor is the output of a recorded backward. If you need "
    "gradient accumulation, allocate stable .grad buffers before the compiled backward runs (an "
    "eager warm-up iteration, or zeroed .grad tensors); otherwise set .grad to None before each "
    "backward. Stack trace of where it was produced: {stack}"
)
FREED = (
    "Error: accessing tensor output of an NPU graph that has been freed ({what}) by "
    "torch.compiler.reset() or the graph trees' reset(). Clone outputs you keep across a reset. "
    "Stack trace of where it was produced: {stack}"
)

# Output plan entries besides a storage index (shared with csrc/graphs/graph_replay.cpp).
_NOT_TENSOR = -1
_BORROWED = -2


def _borrowed_placeholder(a: torch.Tensor) -> torch.Tensor:
    # A new tensor object on the same memory: holding the caller's own object would keep
    # it alive forever. A tensor handed out by another graph gets a storage of its own
    # too, kept alive by that graph's memory: invalidating or dropping the handed-out one
    # must not reach this graph.
    if not _graph_replay.is_storage_alias(a):
        return a.detach()
    t = torch.empty(0, dtype=a.dtype, device=a.device)
    with torch.no_grad():
        t.set_(_graph_replay.alias_storage(a).untyped_storage(), a.storage_offset(), a.shape, a.stride())
    return t


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
        num_user_outputs: int,
        *,
        name: str = "",
        is_backward: bool = False,
        stack_traces: list[str | None] | None = None,
    ):
        self.graph = graph
        self.placeholders = placeholders
        self.borrowed_idxs = borrowed_idxs
        self.borrowed_ptrs = tuple(placeholders[i].data_ptr() for i in borrowed_idxs)
        self.copied_idxs = copied_idxs
        self.writeback_idxs = writeback_idxs
        self.static_outputs = static_outputs
        self.num_user_outputs = num_user_outputs
        self.name = name
        self._template = OVERWRITTEN_GRAD if is_backward else OVERWRITTEN
        self._stack_traces = stack_traces or []
        borrowed_storages = {placeholders[i].untyped_storage().data_ptr() for i in borrowed_idxs}
        # Per output: _NOT_TENSOR, _BORROWED (memory of a borrowed input, such as a
        # parameter saved for backward: handed out as is), or the index of the graph-owned
        # storage it lives on (a copied input's placeholder counts: it is refilled at every
        # replay, after what was handed out of it was released).
        plan: list[int] = []
        self._storages: list[torch.Tensor] = []  # one tensor per distinct graph-owned storage
        saved: list[bool] = []
        self._storage_what: list[tuple[str, str]] = []
        by_ptr: dict[int, int] = {}
        for i, o in enumerate(static_outputs):
            if not isinstance(o, torch.Tensor):
                plan.append(_NOT_TENSOR)
                continue
            ptr = o.untyped_storage().data_ptr()
            if ptr in borrowed_storages:
                plan.append(_BORROWED)
                continue
            k = by_ptr.get(ptr)
            if k is None:
                k = by_ptr[ptr] = len(self._storages)
                self._storages.append(o)
                saved.append(True)
                self._storage_what.append(("", ""))
            if i < num_user_outputs:
                saved[k] = False
                if not self._storage_what[k][0]:
                    self._storage_what[k] = self._describe(i)
            plan.append(k)
        for k, what in enumerate(self._storage_what):
            if not what[0]:
                self._storage_what[k] = self._describe(plan.index(k))
        # Releasing what the last run handed out, refilling copied inputs, the replay, the
        # write-back and handing out new outputs: one C++ call per replay. Public: the
        # tree's per-call path calls it directly (``run`` below is the same call).
        self.plan = _graph_replay.ReplayPlan(
            graph,
            list(static_outputs),
            plan,
            self._storages,
            saved,
            [self._template.format(what=what, stack=stack) for what, stack in self._storage_what],
            list(copied_idxs),
            [placeholders[i] for i in copied_idxs],
            list(writeback_idxs),
            list(borrowed_idxs),
            list(self.borrowed_ptrs),
        )
        # The generation the last run ran in.
        self.last_generation: Any = None

    def _describe(self, i: int) -> tuple[str, str]:
        """Which output ``i`` is, and the user's stack where it was produced (as CUDA words it)."""
        trace = self._stack_traces[i] if i < len(self._stack_traces) else None
        return f"output {i} of NPU graph {self.name}", trace.strip() if trace else "[Could not find stack trace]"

    @classmethod
    def record(
        cls,
        fn: Callable[[list[Any]], Any],
        args: list[Any],
        *,
        is_borrowed: Callable[[int, Any], bool],
        mutated_idxs: set[int],
        num_user_outputs: int | None,
        stream: torch.Stream,
        pool: int | None,
        name: str = "",
        is_backward: bool = False,
        stack_traces: list[str | None] | None = None,
    ) -> "RecordedGraph":
        """Capture ``fn`` on ``args``'s signature; the result has not run yet.

        ``num_user_outputs``: how many leading outputs the caller keeps (the rest are saved
        for a backward); None means all. Raises whatever the capture raises (a host sync, a
        data-dependent shape); the runtime has then already closed the capture.
        """
        placeholders: list[Any] = []
        borrowed: list[int] = []
        copied: list[int] = []
        with torch.no_grad():
            for i, a in enumerate(args):
                if not isinstance(a, torch.Tensor):
                    placeholders.append(a)
                elif is_borrowed(i, a):
                    placeholders.append(_borrowed_placeholder(a))
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
        n_user = len(outputs) if num_user_outputs is None else min(num_user_outputs, len(outputs))
        return cls(
            graph,
            placeholders,
            tuple(borrowed),
            tuple(copied),
            tuple(i for i in copied if i in mutated_idxs),
            outputs,
            n_user,
            name=name,
            is_backward=is_backward,
            stack_traces=stack_traces,
        )

    def matches(self, args: list[Any]) -> bool:
        """True if every borrowed input is passed at the address it was captured at."""
        return self.plan.matches(args)

    @property
    def copies(self) -> dict[str, int]:
        """Inputs copied into placeholders, and held outputs moved off graph memory, so far."""
        return {"inputs": self.plan.copied_inputs, "outputs": self.plan.moved_outputs}

    def release(self, *, move_all: bool = False, template: str | None = None) -> None:
        """Before graph memory is overwritten: move saved tensors still held, invalidate user outputs."""
        # Whatever still holds the old memory (a view made outside) must not read values
        # of a later run silently: it raises the template's message.
        messages = None if template is None else [
            template.format(what=what, stack=stack) for what, stack in self._storage_what
        ]
        self.plan.release(move_all, messages)

    def run(self, args: list[Any], generation: Any, *, move_all: bool = False) -> list[Any]:
        """Replay on ``args`` (``matches(args)`` must hold) and return the outputs."""
        out = self.plan.run(args, move_all)
        self.last_generation = generation
        return out

    def output_storage_ptrs(self) -> list[int]:
        """Data pointers of the graph-owned storages its outputs live on."""
        return [base.untyped_storage().data_ptr() for base in self._storages]

    def reset(self) -> None:
        """Free the graph's memory; outputs still held are moved off it first."""
        self.release(move_all=True, template=FREED)
        self.plan.clear()
        self.graph.reset()
        self.placeholders = []
        self.static_outputs = []
        self._storages = []
