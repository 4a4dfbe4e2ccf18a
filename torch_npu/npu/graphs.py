"""NPU graphs: capture work queued on an npu stream once, replay it many times.

This is the ``torch.cuda.graphs`` surface for the npu device (``NPUGraph``, the
``graph`` context manager, ``graph_pool_handle``, ``is_current_stream_capturing``,
``make_graphed_callables``) over the runtime's ``torch_npu._C._Graph``. The semantics
follow the CUDA twins: a capture belongs to a stream; the work queued on it (by any
thread: autograd runs a backward on its forward's stream) is recorded and not run, while
other streams and threads keep running theirs; memory allocated during capture belongs to
the graph's pool and keeps its address until ``reset()``; ``replay()`` runs the recorded
work on that same memory. ``capture_error_mode`` decides, as on CUDA, where host syncs
outside the captured stream are refused while a capture is underway.

``capture_report(step, *args)`` runs a step once under the capture rules without
aborting, and lists every operation that would break a capture, each with its Python
stack: the tool to reach for when a graph backend says a graph runs uncaptured.

``torch.npu`` re-exports these names lazily, so importing the device module does not
load this file.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

import torch_npu._C as _C

from .graph_task_update import (
    graph_task_group_begin,
    graph_task_group_end,
    graph_task_update_begin,
    graph_task_update_end,
)
from .hardware_only import _GRAPH_TASK_INSTEAD, _GRAPH_TASK_WHY, _unsupported, super_kernel_scope_begin, super_kernel_scope_end

__all__ = [
    "graph_task_group_begin",
    "graph_task_group_end",
    "graph_task_update_begin",
    "graph_task_update_end",
    "super_kernel_scope_begin",
    "super_kernel_scope_end",
    "is_current_stream_capturing",
    "graph_pool_handle",
    "NPUGraph",
    "graph",
    "make_graphed_callables",
    "capture_report",
    "CaptureReport",
    "CaptureProblem",
]

# As CUDA's cudaStreamCaptureMode: a host wait on the captured stream's own work always
# aborts the capture; other host syncs are refused on every thread ("global"), on the
# capturing thread only ("thread_local"), or nowhere ("relaxed").
_CAPTURE_ERROR_MODES = ("global", "thread_local", "relaxed")


def is_current_stream_capturing() -> bool:
    """Return True if an NPU graph capture is underway on the current npu stream."""
    return _C._is_current_stream_capturing()


def graph_pool_handle() -> int:
    """Return an opaque token naming a new graph memory pool.

    Pass it as ``pool=`` to several captures so they share one pool; graphs sharing a
    pool must be replayed in the order they were captured.
    """
    return _C._graph_pool_handle()


class NPUGraph(_C._Graph):
    """Wrapper around an NPU graph: ``capture_begin``/``capture_end``, then ``replay``.

    Prefer the :class:`graph` context manager or :func:`make_graphed_callables`, which
    call ``capture_begin``/``capture_end`` for you.
    """

    def __init__(self) -> None:
        super().__init__()

    def capture_begin(self, pool: int | None = None, capture_error_mode: str = "global") -> None:
        """Start capturing the work queued on the current stream into this graph.

        ``pool`` (from :func:`graph_pool_handle` or another graph's :meth:`pool`) makes
        this capture allocate from that pool instead of a private one. The current stream
        must not be the default stream.
        """
        if capture_error_mode not in _CAPTURE_ERROR_MODES:
            raise ValueError(
                f"capture_error_mode must be one of {_CAPTURE_ERROR_MODES}, got {capture_error_mode!r}"
            )
        super().capture_begin(pool=0 if pool is None else int(pool), capture_error_mode=capture_error_mode)

    def register_generator_state(self, generator: torch.Generator) -> None:
        """Let the captures of this graph draw from ``generator``, an npu generator other
        than the default ones (which are always registered), as ``CUDAGraph``'s twin.

        Each replay then draws at the generator's offset of that moment and advances it
        by what it drew, as the eager calls would. Call it before :meth:`capture_begin`;
        drawing from an unregistered generator during a capture raises. :meth:`reset`
        forgets the registrations.
        """
        super().register_generator_state(generator)

    def capture_end(self) -> None:
        """End the capture; after this, :meth:`replay` may be called.

        Raises if the capture was aborted (say, by a host sync): the graph then holds
        nothing and its pool is returned.
        """
        super().capture_end()

    def replay(self) -> None:
        """Run the captured work again, on the memory it was captured with."""
        super().replay()

    def reset(self) -> None:
        """Drop the captured work and return the graph's pool memory."""
        super().reset()

    def pool(self) -> int:
        """The id of this graph's memory pool, usable as ``pool=`` for another capture."""
        return super().pool()

    def update(self, cpu_update_input):
        """Update the parameters of captured operators (captures made with
        ``auto_dispatch_capture=True``); raises on the simulator, which has no task update."""
        _unsupported("NPUGraph.update", _GRAPH_TASK_WHY, _GRAPH_TASK_INSTEAD)

    def debug_dump(self, debug_path) -> None:
        """Write a description of the captured graph (its node and kernel launch counts)
        to the text file ``debug_path``; the card writes its graph dump there."""
        path = os.fspath(debug_path)
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise ValueError(f"debug_dump: the directory of {path!r} does not exist")
        with open(path, "w") as f:
            f.write(f"NPUGraph pool={self.pool()} nodes={self.num_nodes()} "
                    f"kernel_launches={self.num_kernel_launches()}\n")

    def super_kernel_optimize(self, optimize_options=None, debug_options=None) -> None:
        """Fuse the captured kernels into super kernels (a card optimisation). Options are
        validated (dicts or None); the simulator replays kernels one by one, so nothing
        changes."""
        for name, options in (("optimize_options", optimize_options), ("debug_options", debug_options)):
            if options is not None and not isinstance(options, dict):
                raise TypeError(f"{name} must be a dict or None, got {type(options).__name__}")


class graph:
    """Context manager that captures the npu work of its body into ``npu_graph``.

    Arguments mirror ``torch.cuda.graph``: ``pool`` shares a memory pool with other
    captures; ``stream`` is the stream to capture on (default: a side stream of the
    current device shared by all ``graph`` contexts, so the capture does not sit on the
    default stream); ``capture_error_mode`` is accepted for compatibility;
    ``auto_dispatch_capture`` (Ascend: record operators for ``NPUGraph.update``) is
    accepted and remembered, and ``update`` raises.

    If the body raises (for instance a host sync such as ``.item()``), the capture is
    closed and its partial recording dropped before the exception leaves the ``with``
    block; the stream is usable afterwards. If the capture was aborted but the body went
    on (it caught the error), leaving the block raises.

    The capture records the work queued on the capture stream, and on side streams that
    joined it by waiting on an event recorded on it (fork/join as on CUDA). A backward run
    inside the block (``torch.autograd.grad``) is recorded too: autograd's device thread
    runs each backward node on the stream its forward ran on.
    """

    # One side stream per device, created on first use (creating it at import would
    # initialize the device); a capture on device 1 should not switch to device 0.
    default_capture_streams: dict[int, torch.Stream] = {}

    def __init__(
        self,
        npu_graph: NPUGraph,
        pool: int | None = None,
        stream: torch.Stream | None = None,
        auto_dispatch_capture: bool = False,
        capture_error_mode: str = "global",
    ):
        if not isinstance(auto_dispatch_capture, bool):
            raise TypeError(f"auto_dispatch_capture must be a bool, got {type(auto_dispatch_capture).__name__}")
        # Recorded for NPUGraph.update, which the simulator cannot offer (see there).
        self.auto_dispatch_capture = auto_dispatch_capture
        if stream is None:
            index = torch.npu.current_device()
            streams = self.__class__.default_capture_streams
            if index not in streams:
                streams[index] = torch.npu.Stream(device=index)
            stream = streams[index]
        self.pool = pool
        self.capture_stream = stream
        self.stream_ctx = torch.npu.stream(self.capture_stream)
        self.npu_graph = npu_graph
        self.capture_error_mode = capture_error_mode
        self._capturing = False

    def __enter__(self) -> None:
        # Work queued before the capture must not leak into it.
        torch.npu.synchronize()
        torch.npu.empty_cache()
        self.stream_ctx.__enter__()
        try:
            self.npu_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise
        self._capturing = True

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        try:
            if self._capturing:
                self._capturing = False
                if exc_type is None:
                    try:
                        self.npu_graph.capture_end()
                    except BaseException:
                        self.npu_graph.reset()
                        raise
                else:
                    # A host sync has already aborted the capture in the runtime; any
                    # other exception leaves it open. Either way: close it, drop what
                    # was recorded so no half-captured graph can be replayed, and let
                    # the body's exception propagate.
                    try:
                        self.npu_graph.capture_end()
                    except Exception:
                        pass  # the body's exception is the one to report
                    finally:
                        self.npu_graph.reset()
        finally:
            self.stream_ctx.__exit__(exc_type, exc_value, traceback)


def make_graphed_callables(
    callables: Any,
    sample_args: Any,
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: int | None = None,
) -> Any:
    """Return graphed versions of ``callables`` (functions or modules), as ``torch.cuda``'s twin.

    Each graphed callable runs its forward work as one NPU graph inside one autograd
    node, whose backward replays a second graph. A tuple of callables shares one pool;
    they must then run in the order given (forwards) and in reverse (backwards).
    ``sample_args`` holds only tensors; the graphed callable must be called with
    arguments of the same shapes, order and ``requires_grad``. Modules must have no hooks
    when passed and only parameters may require grad; a module's graphed forward runs
    only in the training/eval state it was graphed in (otherwise the original forward).
    """
    if torch.is_autocast_enabled("npu") and torch.is_autocast_cache_enabled():
        raise RuntimeError(
            "make_graphed_callables does not support the autocast caching. Please set `cache_enabled=False`."
        )

    just_one_callable = not isinstance(callables, tuple)
    if just_one_callable:
        callables = (callables,)
        sample_args = (sample_args,)

    flatten_sample_args = []
    for c, args in zip(callables, sample_args):
        if isinstance(c, torch.nn.Module):
            if c._backward_hooks or c._forward_hooks or c._forward_pre_hooks:
                raise RuntimeError(
                    "Modules must not have hooks registered at the time they are passed. However, "
                    "registering hooks on modules after passing them through make_graphed_callables is allowed."
                )
            if not all(b.requires_grad is False for b in c.buffers()):
                raise RuntimeError(
                    "In any module passed to make_graphed_callables, only parameters may be trainable: "
                    "all buffers must have requires_grad=False."
                )
        flat = torch.utils._pytree.arg_tree_leaves(*args)
        if not all(isinstance(a, Tensor) for a in flat):
            raise TypeError("sample_args for make_graphed_callables must contain only Tensors.")
        flatten_sample_args.append(tuple(flat))

    # A graph's input surface is its explicit args plus a module's parameters: autograd
    # must see both to route gradients through the graphed node.
    per_callable_len_user_args = [len(a) for a in flatten_sample_args]
    per_callable_module_params = [
        tuple(c.parameters()) if isinstance(c, torch.nn.Module) else () for c in callables
    ]
    per_callable_static_input_surfaces = [
        flatten_sample_args[i] + per_callable_module_params[i] for i in range(len(callables))
    ]

    fwd_graphs = [NPUGraph() for _ in callables]
    bwd_graphs = [NPUGraph() for _ in callables]
    mempool = graph_pool_handle() if pool is None else pool

    # Warm-up runs eagerly on a side stream so one-time work (lazy init, autograd
    # bookkeeping) happens outside the captures.
    torch.npu.synchronize()
    with torch.npu.stream(torch.npu.Stream()):
        for func, args, surface in zip(callables, sample_args, per_callable_static_input_surfaces):
            for _ in range(num_warmup_iters):
                outputs = torch.utils._pytree.tree_leaves(func(*args))
                outputs_grad = tuple(o for o in outputs if isinstance(o, Tensor) and o.requires_grad)
                if outputs_grad:
                    torch.autograd.grad(
                        outputs=outputs_grad,
                        inputs=tuple(i for i in surface if i.requires_grad),
                        grad_outputs=tuple(torch.empty_like(o) for o in outputs_grad),
                        only_inputs=True,
                        allow_unused=allow_unused_input,
                    )
            del outputs
    torch.npu.synchronize()

    # Forwards are captured in run order and backwards in reverse: the shared pool is
    # only safe when replays follow capture order.
    per_callable_static_outputs = []
    per_callable_output_spec = []
    for func, args, fwd_graph in zip(callables, sample_args, fwd_graphs):
        with graph(fwd_graph, pool=mempool):
            func_outputs = func(*args)
        flat_out, spec = torch.utils._pytree.tree_flatten(func_outputs)
        per_callable_static_outputs.append(tuple(flat_out))
        per_callable_output_spec.append(spec)

    per_callable_static_grad_outputs = []
    per_callable_static_grad_inputs = []
    for surface, static_outputs, bwd_graph in zip(
        reversed(per_callable_static_input_surfaces),
        reversed(per_callable_static_outputs),
        reversed(bwd_graphs),
    ):
        static_grad_outputs = tuple(torch.empty_like(o) if o.requires_grad else None for o in static_outputs)
        outputs_grad = tuple(o for o in static_outputs if o.requires_grad)
        grad_inputs = None
        if outputs_grad:
            grad_inputs = _capture_backward(
                bwd_graph,
                mempool,
                outputs_grad,
                tuple(i for i in surface if i.requires_grad),
                tuple(o for o in static_grad_outputs if o is not None),
                allow_unused_input,
            )
        # One slot per surface input: None where the input does not require grad.
        static_grad_inputs = []
        grad_idx = 0
        for arg in surface:
            if arg.requires_grad and grad_inputs is not None:
                static_grad_inputs.append(grad_inputs[grad_idx])
                grad_idx += 1
            else:
                static_grad_inputs.append(None)
        per_callable_static_grad_outputs.append(static_grad_outputs)
        per_callable_static_grad_inputs.append(tuple(static_grad_inputs))
    per_callable_static_grad_outputs.reverse()
    per_callable_static_grad_inputs.reverse()

    ret = []
    for i, func in enumerate(callables):
        graphed = _make_graphed_autograd_function(
            fwd_graphs[i],
            bwd_graphs[i],
            per_callable_module_params[i],
            per_callable_len_user_args[i],
            per_callable_output_spec[i],
            per_callable_static_input_surfaces[i],
            per_callable_static_outputs[i],
            per_callable_static_grad_outputs[i],
            per_callable_static_grad_inputs[i],
        )
        if isinstance(func, torch.nn.Module):
            func.forward = _make_graphed_forward(func, func.training, graphed, func.forward)
            ret.append(func)
        else:
            ret.append(graphed)
    return ret[0] if just_one_callable else tuple(ret)


def _capture_backward(
    bwd_graph: NPUGraph,
    pool: int,
    outputs: tuple[Tensor, ...],
    inputs: tuple[Tensor, ...],
    grad_outputs: tuple[Tensor, ...],
    allow_unused: bool,
) -> tuple[Tensor | None, ...]:
    """Capture the backward from ``outputs`` to ``inputs`` into ``bwd_graph``.

    ``outputs`` were produced by a captured forward on the shared capture stream, so
    autograd's device thread runs their backward on that stream, which this capture
    records.
    """
    with graph(bwd_graph, pool=pool):
        return torch.autograd.grad(
            outputs=outputs,
            inputs=inputs,
            grad_outputs=grad_outputs,
            only_inputs=True,
            allow_unused=allow_unused,
        )


def _make_graphed_autograd_function(
    fwd_graph: NPUGraph,
    bwd_graph: NPUGraph,
    module_params: tuple[Tensor, ...],
    len_user_args: int,
    output_spec: Any,
    static_input_surface: tuple[Tensor, ...],
    static_outputs: tuple[Tensor, ...],
    static_grad_outputs: tuple[Tensor | None, ...],
    static_grad_inputs: tuple[Tensor | None, ...],
) -> Callable[..., object]:
    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *inputs: Tensor) -> tuple[Tensor, ...]:
            # Only the user args can be new tensors; parameters are the captured ones.
            for i in range(len_user_args):
                if static_input_surface[i].data_ptr() != inputs[i].data_ptr():
                    static_input_surface[i].copy_(inputs[i])
            fwd_graph.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx: Any, *grads: Tensor) -> tuple[Tensor | None, ...]:
            for g, grad in zip(static_grad_outputs, grads):
                if g is not None and grad is not None and g.data_ptr() != grad.data_ptr():
                    g.copy_(grad)
            bwd_graph.replay()
            return tuple(b.detach() if b is not None else None for b in static_grad_inputs)

    def functionalized(*user_args: object) -> object:
        flat_user_args = torch.utils._pytree.arg_tree_leaves(*user_args)
        out = Graphed.apply(*(tuple(flat_user_args) + module_params))
        return torch.utils._pytree.tree_unflatten(out, output_spec)

    return functionalized


def _make_graphed_forward(
    module: torch.nn.Module,
    graph_training_state: bool,
    graphed: Callable[..., Any],
    orig_fwd: Callable[..., Any],
) -> Callable[..., Any]:
    def new_fwd(*user_args: Any, **user_kwargs: Any) -> Any:
        # The graph was captured in one training/eval state; the other runs eagerly.
        if module.training == graph_training_state:
            return graphed(*user_args, **user_kwargs)
        return orig_fwd(*user_args, **user_kwargs)

    return new_fwd



@dataclasses.dataclass(frozen=True)
class CaptureProblem:
    """One operation of a step that an NPU graph capture could not record."""

    # "host sync", "dynamic output shape", "unsupported op", "host value", "generator state"
    # (a seed or rng state read or set), "unregistered generator" (a draw from a generator
    # other than the default ones, see NPUGraph.register_generator_state)
    kind: str
    op: str  # the operator or call
    detail: str  # what the capture would have raised
    stack: tuple[traceback.FrameSummary, ...]  # where the step issued it

    def __str__(self) -> str:
        where = "".join(traceback.format_list(list(self.stack[-4:]))).rstrip()
        return f"{self.kind}: {self.op}\n{where}"


@dataclasses.dataclass(frozen=True)
class CaptureReport:
    """What :func:`capture_report` found: the problems, in order, and the step's result."""

    problems: tuple[CaptureProblem, ...]
    result: Any

    @property
    def capturable(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        if not self.problems:
            return "The step can be captured into an NPU graph: no operation breaks capture."
        lines = [f"{len(self.problems)} operation(s) of the step would break an NPU graph capture:"]
        for i, problem in enumerate(self.problems, 1):
            lines.append(f"{i}. {problem}")
        return "\n".join(lines)


# Innermost frames inside torch or torch_npu are how an op was reached, not where the step
# issued it: they are trimmed from the reported stacks.
_LIBRARY_DIRS = tuple(
    os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (torch, sys.modules["torch_npu"])
)


def _user_stack(frames: list[traceback.FrameSummary]) -> tuple[traceback.FrameSummary, ...]:
    end = len(frames)
    while end > 0 and os.path.abspath(frames[end - 1].filename).startswith(_LIBRARY_DIRS):
        end -= 1
    return tuple(frames[:end] if end else frames)


def capture_report(step: Callable[..., Any], *args: Any, stream: torch.Stream | None = None,
                   generators: Iterable[torch.Generator] = (), **kwargs: Any) -> CaptureReport:
    """Run ``step(*args, **kwargs)`` once under NPU graph capture rules, without capturing.

    The step runs for real (its result is ``report.result``) on a side stream, as it would
    run inside ``torch.npu.graph``; every operation that would make a capture fail -- a host
    sync (``.item()``, ``.cpu()``, ``torch.npu.synchronize()``, a copy from a cpu tensor), an
    operator whose output shape depends on its values (``nonzero``, boolean masks) or that
    has no shape function, an operator returning a host value, a generator's seed or state
    read or set, a draw from a generator other than the default ones that is not among
    ``generators`` (those the real graph registers with ``NPUGraph.register_generator_state``)
    -- is listed with the Python stack that issued it, instead of aborting at the first one.
    ``print(report)`` shows them.
    """
    if stream is None:
        index = torch.npu.current_device()
        streams = graph.default_capture_streams
        if index not in streams:
            streams[index] = torch.npu.Stream(device=index)
        stream = streams[index]
    problems: list[CaptureProblem] = []

    def collect(kind: str, op: str, detail: str) -> None:
        problems.append(CaptureProblem(kind, op, detail, _user_stack(traceback.extract_stack()[:-1])))

    checker = _C._Graph()
    for generator in generators:
        checker.register_generator_state(generator)
    torch.npu.synchronize()
    with torch.npu.stream(stream):
        checker.check_begin(collect)
        try:
            result = step(*args, **kwargs)
        finally:
            checker.capture_end()
    return CaptureReport(tuple(problems), result)
