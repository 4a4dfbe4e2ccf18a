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
* outputs are handed out in place (no copy, see ``recorded_graph``) and stay valid until
  their graph replays in a later generation; a generation is, as for CUDA trees, the
  ``mark_step_begin`` count once that has been called, else one compiled-function
  invocation (Dynamo's generation counter). In the same generation, or while a forward's
  saved activations still wait for their backward (and ``mark_step_begin`` was never
  called), a graph whose outputs are still held is not overwritten: a sibling graph is
  recorded for the next call, as CUDA trees record a new child. A replay in a new
  generation makes the user outputs still held fail loudly when read and moves waiting
  activations to fresh memory; past the sibling limit everything still held is moved;
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
import sys
import threading
import weakref
from typing import Any, Callable

import torch

from torch_npu.npu import _graph_replay, _graph_step_state

from .recorded_graph import RecordedGraph

log = logging.getLogger(__name__)
# TORCH_LOGS=npu_graphs: records, replays and eager runs, with their reasons.
graphs_log = torch._logging.getArtifactLogger(__name__, "npu_graphs")

# Siblings recorded for one signature before falling back to moving live activations:
# enough for a few gradient-accumulation micro-batches without unbounded memory.
MAX_GRAPHS_PER_SIGNATURE = 4


def current_generation() -> tuple[int, int]:
    """(mark_step_begin count, 0) once that was called, else (0, Dynamo's invocation count)."""
    step = _graph_step_state.current_step()
    if step:
        return (step, 0)
    # Read, never imported here: the trees run under Dynamo, which bumps this counter on
    # every entry into a compiled function, as CUDA graph trees rely on.
    guard = sys.modules.get("torch._dynamo.mutation_guard")
    return (0, guard.GenerationTracker.generation if guard is not None else 0)


def _rerecord_limit() -> int | None:
    inductor_config = sys.modules.get("torch._inductor.config")
    return inductor_config.triton.cudagraph_unexpected_rerecord_limit if inductor_config is not None else None


class CompilationMode(enum.Enum):
    FORWARD = "forward"
    BACKWARD = "backward"
    INFERENCE = "inference"


def _signature(args: list[Any], indices: list[int]) -> Any:
    """The input signature of ``args`` at ``indices``: one C++ call returning bytes in the
    usual case (tensors, ints, floats, bools, None), a tuple built here otherwise."""
    # Only the inputs at `indices`: static inputs (parameters, buffers) are left out, since
    # Dynamo guards their metadata and the recorded graphs check their addresses.
    key = _graph_replay.graph_input_signature(args, indices)
    if key is not None:
        return key
    slow = []
    for i in indices:
        a = args[i]
        if isinstance(a, torch.Tensor):
            slow.append((a.shape, a.stride(), a.dtype, a.device))
        elif isinstance(a, (int, float, bool, str)) or a is None:
            slow.append(a)
        else:
            slow.append(type(a).__name__)
    return tuple(slow)


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
        stack_traces: list[str | None] | None = None,
    ):
        # An instance attribute, not a class one: wrappers built with functools.wraps
        # (Dynamo's disable around a backward) copy the instance __dict__ only.
        self._boxed_call = True
        self.manager = manager
        self.model = model
        self.mode = mode
        self.static_input_idxs = static_input_idxs
        self.mutated_input_idxs = mutated_input_idxs
        # Outputs below this index are the caller's (invalidated when overwritten); the
        # rest are a forward's saved activations (moved when overwritten while held). A
        # forward whose split is unknown (an AOT-autograd-cache hit) treats all as saved.
        if mode is CompilationMode.FORWARD:
            self.num_user_outputs = num_user_outputs if num_user_outputs is not None else 0
        else:
            self.num_user_outputs = None
        self.stack_traces = stack_traces
        self.name = name
        self.disabled_reason = disabled_reason
        self.all_inputs_static = all_inputs_static
        self._graphs: dict[tuple, list[RecordedGraph]] = {}
        self._warned = False
        self._warned_dynamic = False
        self._rerecords = 0
        self._signature_idxs: list[int] = []
        self._signature_len = -1
        # Per signature, the addresses of the mutated inputs at its warm-up. A mutated input
        # passed at the same address again when its graph is recorded (a KV cache, a state
        # buffer) is borrowed like a buffer: the graph updates it in place instead of
        # copying it in and back at every replay. Replays check its address like a
        # buffer's; a new address records a new graph.
        self._warmup_mutated_ptrs: dict[Any, dict[int, int]] = {}
        self._recording_stable_ptrs: dict[int, int] = {}
        manager.register(self)

    def num_graphs(self) -> int:
        return sum(len(v) for v in self._graphs.values())

    def clear(self) -> None:
        for graphs in self._graphs.values():
            for g in graphs:
                g.reset()
        self._graphs.clear()
        self._warmup_mutated_ptrs.clear()

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

    def _eager(self, args: list[Any], reason: str) -> Any:
        self.manager.stats["eager_runs"] += 1
        graphs_log.debug("%s graph %s runs eagerly: %s", self.mode.value, self.name, reason)
        return self.model(list(args))

    def _is_borrowed(self, i: int, a: torch.Tensor) -> bool:
        return (
            self.all_inputs_static
            or i in self.static_input_idxs
            or self.manager.owns(a)
            or self.manager.is_known_static(a)
            or self._recording_stable_ptrs.get(i) == a.data_ptr()
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
            return self._eager(args, self.disabled_reason)
        if _graph_replay.is_current_stream_capturing():
            # Called inside someone else's capture: run the ops so that capture records
            # them (a nested capture or a replay is not allowed there).
            return self._eager(args, "called inside another NPU graph capture, which records its ops")
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
                self._warmup_mutated_ptrs[key] = {
                    i: args[i].data_ptr()
                    for i in self.mutated_input_idxs
                    if i < len(args) and isinstance(args[i], torch.Tensor)
                }
                manager.stats["warmups"] += 1
                graphs_log.debug("%s graph %s: eager warm-up for a new input signature", self.mode.value, self.name)
                self._warn_if_many_signatures()
                return self.model(list(args))

            generation = current_generation()
            mark_step_used = generation[0] != 0
            # The first graph whose borrowed addresses match and whose memory may be
            # overwritten now replays; the matching ones seen so far decide what else
            # to do. Each call takes this path, so it reaches into the C++ plan directly.
            candidates = []
            for g in graphs:
                plan = g.plan
                if not plan.matches(args):
                    continue
                candidates.append(g)
                if not plan.any_alive() or (
                    g.last_generation != generation and (mark_step_used or not plan.any_saved_alive())
                ):
                    manager.stats["replays"] += 1
                    if graphs_log.isEnabledFor(logging.DEBUG):
                        graphs_log.debug("%s graph %s: replay", self.mode.value, self.name)
                    out = plan.run(args, False)
                    g.last_generation = generation
                    return out

            if graphs and not candidates:
                # Borrowed inputs (parameters, buffers, other graphs' outputs) at new
                # addresses: an unexpected re-record, bounded as CUDA graph trees bound it.
                self._rerecords += 1
                limit = _rerecord_limit()
                if limit is not None and self._rerecords > limit:
                    reason = (
                        f"it exceeded the re-recording limit (torch._inductor.config.triton."
                        f"cudagraph_unexpected_rerecord_limit={limit}): its parameters, buffers or inputs "
                        f"from other NPU graphs keep arriving at new addresses"
                    )
                    self._warn(reason)
                    return self._eager(args, reason)

            if len(graphs) < MAX_GRAPHS_PER_SIGNATURE:
                self._recording_stable_ptrs = self._warmup_mutated_ptrs.get(key, {}) if not graphs else {}
                try:
                    graph = self._record(args)
                finally:
                    self._recording_stable_ptrs = {}
                if graph is None:
                    return self._eager(args, self.disabled_reason or "capture failed")
                graphs.append(graph)
                manager.add_graph(graph)
                manager.note_static_inputs(
                    [a for i, a in enumerate(args) if i in self.static_input_idxs and isinstance(a, torch.Tensor)]
                )
                manager.stats["records"] += 1
                graphs_log.debug(
                    "%s graph %s: recorded NPU graph %d of this input signature%s",
                    self.mode.value, self.name, len(graphs),
                    " (the others hold outputs of this generation)" if len(graphs) > 1 else "",
                )
                return graph.run(args, generation)

            if candidates:
                # Outputs of this generation still held and no room for a sibling:
                # whatever is held is moved off the graph's memory by run().
                manager.stats["replays"] += 1
                graphs_log.debug(
                    "%s graph %s: replay after moving the outputs still held off its memory",
                    self.mode.value, self.name,
                )
                return candidates[0].run(args, generation, move_all=True)
            reason = (
                f"{MAX_GRAPHS_PER_SIGNATURE} graphs were recorded for this input signature and none "
                f"matches the addresses of its parameters, buffers or inputs from other NPU graphs"
            )
            self._warn(reason)
            return self._eager(args, reason)

    def _record(self, args: list[Any]) -> RecordedGraph | None:
        try:
            with torch.npu.device(self.manager.device_index):
                return RecordedGraph.record(
                    self.model,
                    args,
                    is_borrowed=self._is_borrowed,
                    mutated_idxs=self.mutated_input_idxs,
                    num_user_outputs=self.num_user_outputs,
                    stream=self.manager.stream,
                    pool=None,
                    name=f"{self.name} ({self.mode.value})",
                    is_backward=self.mode is CompilationMode.BACKWARD,
                    stack_traces=self.stack_traces,
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
