"""Per-device bookkeeping of NPU graph trees, and the wrapper each compiled graph runs in.

Learned from ``torch/_inductor/cudagraph_trees.py`` (CUDA only), rewritten for npu:

* each compiled ATen graph (forward, backward or inference) becomes a ``GraphFunction``;
  for each input signature (shapes, strides, dtypes, int values) its first call is an
  eager warm-up, the second records an NPU graph, later calls replay it;
* graphs of one device are children of that device's ``TreeManager``, which knows which
  memory belongs to recorded graphs: a tensor living there (a forward's saved activation
  reaching the backward, one model's output feeding another) is borrowed by the graphs
  that consume it instead of being copied, as parameters and buffers are;
* CUDA graph trees share one memory pool along a path and must replay in recorded order;
  here each recorded graph has its own pool, so graphs replay in any order (two models
  interleaved, a backward skipped) at the cost of not sharing memory between them;
* a forward whose saved activations are still waiting for their backward within the
  same step (``mark_step_begin`` starts a new one) is not overwritten: a sibling graph is
  recorded for the next call, as CUDA trees record a new child; across steps, or past
  the sibling limit, the waiting activations are moved to fresh memory before replay;
* each new input signature records new graphs; past
  ``torch._inductor.config.triton.cudagraph_dynamic_shape_warn_limit`` signatures of one
  compiled function the trees log the warning CUDA graph trees log;
* whatever cannot be captured (a host sync, a data-dependent shape, cpu tensors) runs
  uncaptured, with one log line per compiled graph naming the reason and pointing to
  ``torch.npu.graphs.capture_report``, which lists every offending op of a step.
"""
from __future__ import annotations

import enum
import logging
import threading
import weakref
from typing import Any, Callable

import torch

from torch_npu.npu import _graph_step_state

from .recorded_graph import RecordedGraph

log = logging.getLogger(__name__)

# Siblings recorded for one signature before falling back to moving live activations:
# enough for a few gradient-accumulation micro-batches without unbounded memory.
MAX_GRAPHS_PER_SIGNATURE = 4


class CompilationMode(enum.Enum):
    FORWARD = "forward"
    BACKWARD = "backward"
    INFERENCE = "inference"


def _signature(args: list[Any], indices: list[int]) -> tuple:
    # Only the inputs at `indices`: static inputs (parameters, buffers) are left out, since
    # Dynamo guards their metadata and RecordedGraph.matches checks their addresses; this
    # runs on every call.
    key = []
    for i in indices:
        a = args[i]
        if isinstance(a, torch.Tensor):
            key.append((a.shape, a.stride(), a.dtype, a.device))
        elif isinstance(a, (int, float, bool, str)) or a is None:
            key.append(a)
        else:
            key.append(type(a).__name__)
    return tuple(key)


class TreeManager:
    """The NPU graphs of one device: capture stream, owned memory, compiled functions."""

    def __init__(self, device_index: int):
        self.device_index = device_index
        self.lock = threading.RLock()
        self._stream: torch.Stream | None = None
        # Storage data pointers of recorded graphs' outputs -> number of graphs owning them.
        self._owned: dict[int, int] = {}
        # Data pointers of the static inputs (parameters, buffers) forwards were recorded
        # with: a backward borrows them too instead of copying them at every replay.
        self._static_ptrs: set[int] = set()
        # Weak: a compiled function dropped by Dynamo's caches takes its graphs with it.
        self._functions: weakref.WeakSet[GraphFunction] = weakref.WeakSet()
        self.stats = {"warmups": 0, "records": 0, "replays": 0, "eager_runs": 0}
        # Bumped by reset(), so bookkeeping of graphs freed before it is not undone twice.
        self._generation = 0

    @property
    def stream(self) -> torch.Stream:
        # Created on first capture: building it earlier would initialize the device.
        if self._stream is None:
            self._stream = torch.npu.Stream(device=self.device_index)
        return self._stream

    def owns(self, t: torch.Tensor) -> bool:
        return t.untyped_storage().data_ptr() in self._owned

    def is_known_static(self, t: torch.Tensor) -> bool:
        # Borrowing is always correct (a replay checks the addresses it borrowed); a wrong
        # guess only costs a new recording.
        return t.data_ptr() in self._static_ptrs

    def note_static_inputs(self, tensors: list[torch.Tensor]) -> None:
        self._static_ptrs.update(t.data_ptr() for t in tensors)

    def add_graph(self, graph: RecordedGraph) -> None:
        ptrs = graph.output_storage_ptrs()
        for ptr in ptrs:
            self._owned[ptr] = self._owned.get(ptr, 0) + 1
        # When the graph goes (its compiled function dropped by Dynamo), its memory does
        # too, and a later tensor at one of these addresses is an ordinary input again.
        weakref.finalize(graph, self._forget, ptrs, self._generation)

    def _forget(self, ptrs: list[int], generation: int) -> None:
        with self.lock:
            if generation != self._generation:
                return  # reset() already forgot everything
            for ptr in ptrs:
                count = self._owned.get(ptr, 0) - 1
                if count > 0:
                    self._owned[ptr] = count
                else:
                    self._owned.pop(ptr, None)

    def register(self, fn: "GraphFunction") -> None:
        with self.lock:
            self._functions.add(fn)

    def num_graphs(self) -> int:
        return sum(fn.num_graphs() for fn in list(self._functions))

    def reset(self) -> None:
        """Free every recorded graph; compiled functions warm up and record again."""
        with self.lock:
            for fn in list(self._functions):
                fn.clear()
            self._owned.clear()
            self._static_ptrs.clear()
            self._generation += 1
            for key in self.stats:
                self.stats[key] = 0


class GraphFunction:
    """A compiled ATen graph run through NPU graphs (boxed: called with a list of inputs)."""

    def __init__(
        self,
        manager: TreeManager,
        model: Callable[[list[Any]], Any],
        *,
        mode: CompilationMode,
        static_input_idxs: set[int],
        mutated_input_idxs: set[int],
        num_user_outputs: int | None,
        name: str,
        disabled_reason: str | None = None,
        all_inputs_static: bool = False,
    ):
        # An instance attribute, not a class one: wrappers built with functools.wraps
        # (Dynamo's disable around a backward) copy the instance __dict__ only.
        self._boxed_call = True
        self.manager = manager
        self.model = model
        self.mode = mode
        self.static_input_idxs = static_input_idxs
        self.mutated_input_idxs = mutated_input_idxs
        # Outputs below this index are cloned for the caller; the rest (a forward's saved
        # activations) are aliases of graph memory. None: clone everything.
        self.num_cloned_outputs = None if mode is not CompilationMode.FORWARD else num_user_outputs
        self.name = name
        self.disabled_reason = disabled_reason
        self.all_inputs_static = all_inputs_static
        self._graphs: dict[tuple, list[RecordedGraph]] = {}
        self._warned = False
        self._warned_dynamic = False
        self._signature_idxs: list[int] = []
        self._signature_len = -1
        manager.register(self)

    def num_graphs(self) -> int:
        return sum(len(v) for v in self._graphs.values())

    def clear(self) -> None:
        for graphs in self._graphs.values():
            for g in graphs:
                g.reset()
        self._graphs.clear()

    def _warn(self, reason: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "NPU graphs: %s graph %s runs uncaptured: %s. torch.npu.graphs.capture_report(step) "
                "lists every operation of a step that breaks capture.",
                self.mode.value,
                self.name,
                reason,
            )

    def _warn_if_many_signatures(self) -> None:
        from torch._inductor import config

        limit = config.triton.cudagraph_dynamic_shape_warn_limit
        if self._warned_dynamic or not limit or len(self._graphs) <= limit:
            return
        self._warned_dynamic = True
        log.warning(
            "NPU graph trees support dynamic shapes by recording a new graph for each distinct input "
            "size. Recording too many NPU graphs may lead to extra overhead. We have observed %d "
            "distinct sizes (%s graph %s). Please consider the following options for better "
            "performance: a) padding inputs to a few fixed number of shapes; or b) set "
            "torch._inductor.config.triton.cudagraph_skip_dynamic_graphs=True. Set "
            "torch._inductor.config.triton.cudagraph_dynamic_shape_warn_limit=None to silence this "
            "warning.",
            len(self._graphs),
            self.mode.value,
            self.name,
        )

    def _eager(self, args: list[Any]) -> Any:
        self.manager.stats["eager_runs"] += 1
        return self.model(list(args))

    def _is_borrowed(self, i: int, a: torch.Tensor) -> bool:
        return (
            self.all_inputs_static
            or i in self.static_input_idxs
            or self.manager.owns(a)
            or self.manager.is_known_static(a)
        )

    def __call__(self, args: list[Any]) -> Any:
        try:
            return self._run(args)
        finally:
            # Boxed calling convention: the callee drops its inputs when done.
            args.clear()

    def _run(self, args: list[Any]) -> Any:
        if self.disabled_reason is not None:
            self._warn(self.disabled_reason)
            return self._eager(args)
        if torch.npu.is_current_stream_capturing():
            # Called inside someone else's capture: run the ops so that capture records
            # them (a nested capture or a replay is not allowed there).
            return self._eager(args)
        manager = self.manager
        with manager.lock:
            if self._signature_len != len(args):
                self._signature_len = len(args)
                self._signature_idxs = [i for i in range(len(args)) if i not in self.static_input_idxs]
            key = _signature(args, self._signature_idxs)
            graphs = self._graphs.get(key)
            if graphs is None:
                # Warm-up: one eager run per signature, so one-time work (lazy
                # initialization, caches) happens outside the capture.
                self._graphs[key] = []
                manager.stats["warmups"] += 1
                self._warn_if_many_signatures()
                return self.model(list(args))

            step = _graph_step_state.current_step()
            candidates = [g for g in graphs if g.matches(args)]
            for g in candidates:
                if not (g.last_step == step and g.has_live_aliases()):
                    manager.stats["replays"] += 1
                    return g.run(args, step)

            if len(graphs) < MAX_GRAPHS_PER_SIGNATURE:
                graph = self._record(args)
                if graph is None:
                    return self._eager(args)
                graphs.append(graph)
                manager.add_graph(graph)
                manager.note_static_inputs(
                    [a for i, a in enumerate(args) if i in self.static_input_idxs and isinstance(a, torch.Tensor)]
                )
                manager.stats["records"] += 1
                return graph.run(args, step)

            if candidates:
                # Busy with activations of this step and no room for a sibling: the
                # waiting activations are moved off the graph's memory by run().
                manager.stats["replays"] += 1
                return candidates[0].run(args, step)
            return self._eager(args)

    def _record(self, args: list[Any]) -> RecordedGraph | None:
        try:
            with torch.npu.device(self.manager.device_index):
                return RecordedGraph.record(
                    self.model,
                    args,
                    is_borrowed=self._is_borrowed,
                    mutated_idxs=self.mutated_input_idxs,
                    num_cloned_outputs=self.num_cloned_outputs,
                    stream=self.manager.stream,
                    pool=None,
                )
        except RuntimeError as exc:
            # The runtime has closed the capture; nothing ran, so the eager run that
            # follows computes this call. Later calls run eagerly too.
            self.disabled_reason = f"capture failed: {exc}"
            self._warn(self.disabled_reason)
            return None


# One manager per device index, for the whole process: the backward of a graph runs on
# an autograd worker thread and must find the manager its forward used.
_managers: dict[int, TreeManager] = {}
_managers_lock = threading.Lock()


def get_manager(device_index: int, create_if_none_exists: bool = True) -> TreeManager | None:
    with _managers_lock:
        manager = _managers.get(device_index)
        if manager is None and create_if_none_exists:
            manager = _managers[device_index] = TreeManager(device_index)
        return manager


def managers() -> list[TreeManager]:
    with _managers_lock:
        return list(_managers.values())


def reset_graph_trees() -> None:
    """Free every recorded NPU graph on every device and restart the step count."""
    # Managers stay (compiled functions keep pointing at theirs); their graphs go.
    for manager in managers():
        manager.reset()
    _graph_step_state._reset()
