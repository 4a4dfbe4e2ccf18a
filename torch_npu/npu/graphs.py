"""NPU graphs: capture work queued on an npu stream once, replay it many times.

This is the ``torch.cuda.graphs`` surface for the npu device (``NPUGraph``, the
``graph`` context manager, ``graph_pool_handle``, ``is_current_stream_capturing``,
``make_graphed_callables``) over the runtime's ``torch_npu._C._Graph``. The semantics
follow the CUDA twins: while a stream captures, the work queued on it is recorded and not
run; memory allocated during capture belongs to the graph's pool and keeps its address
until ``reset()``; ``replay()`` runs the recorded work on that same memory.

``torch.npu`` re-exports these names lazily, so importing the device module does not
load this file.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

import torch_npu._C as _C

__all__ = [
    "is_current_stream_capturing",
    "graph_pool_handle",
    "NPUGraph",
    "graph",
    "make_graphed_callables",
]

# torch.cuda accepts these capture modes; the simulated runtime has a single capture
# mode (a host sync on the capturing stream is always an error), so the value is
# validated for compatibility and otherwise has no effect.
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

    def capture_begin(self, pool: int | None = None, capture_error_mode: str = "global") -> None:
        """Start capturing the work queued on the current stream into this graph.

        ``pool`` (from :func:`graph_pool_handle` or another graph's :meth:`pool`) makes
        this capture allocate from that pool instead of a private one.
        """
        if capture_error_mode not in _CAPTURE_ERROR_MODES:
            raise ValueError(
                f"capture_error_mode must be one of {_CAPTURE_ERROR_MODES}, got {capture_error_mode!r}"
            )
        super().capture_begin(pool=0 if pool is None else int(pool))

    def capture_end(self) -> None:
        """End the capture; after this, :meth:`replay` may be called."""
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


class graph:
    """Context manager that captures the npu work of its body into ``npu_graph``.

    Arguments mirror ``torch.cuda.graph``: ``pool`` shares a memory pool with other
    captures; ``stream`` is the stream to capture on (default: a side stream of the
    current device shared by all ``graph`` contexts, so the capture does not sit on the
    default stream); ``capture_error_mode`` is accepted for compatibility.

    If the body raises (for instance a host sync such as ``.item()``), the capture is
    closed and its partial recording dropped before the exception leaves the ``with``
    block; the stream is usable afterwards.

    The runtime records the npu work queued by the capturing thread, on any stream (so
    work forked to a side stream and joined back with events is captured in order).
    Autograd runs npu backward nodes on its own thread, so ``torch.autograd.grad`` inside
    this block is not captured; :func:`make_graphed_callables` captures backwards.
    """

    # One side stream per device, created on first use (creating it at import would
    # initialize the device); a capture on device 1 should not switch to device 0.
    default_capture_streams: dict[int, torch.Stream] = {}

    def __init__(
        self,
        npu_graph: NPUGraph,
        pool: int | None = None,
        stream: torch.Stream | None = None,
        capture_error_mode: str = "global",
    ):
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
                    self.npu_graph.capture_end()
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


class _CaptureBackward(torch.autograd.Function):
    """Identity whose backward captures the rest of the backward into ``npu_graph``.

    A capture belongs to the thread that begins it, and autograd runs npu backward
    nodes on its own device thread, so a capture begun around ``torch.autograd.grad``
    would record none of the backward. This node is the first one the backward runs:
    it begins the capture there and queues the end of the capture as a callback of the
    backward pass, which autograd runs on the thread finishing the pass.
    """

    @staticmethod
    def forward(ctx: Any, npu_graph: NPUGraph, pool: int, state: dict, *outputs: Tensor) -> tuple[Tensor, ...]:
        ctx.npu_graph, ctx.pool, ctx.state = npu_graph, pool, state
        return tuple(o.view_as(o) for o in outputs)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple[Any, ...]:
        npu_graph, state = ctx.npu_graph, ctx.state

        def end_capture() -> None:
            if _C._is_current_stream_capturing():
                npu_graph.capture_end()
                state["ended"] = True

        npu_graph.capture_begin(ctx.pool)
        torch.autograd.Variable._execution_engine.queue_callback(end_capture)
        return (None, None, None, *grads)


def _capture_backward(
    bwd_graph: NPUGraph,
    pool: int,
    outputs: tuple[Tensor, ...],
    inputs: tuple[Tensor, ...],
    grad_outputs: tuple[Tensor, ...],
    allow_unused: bool,
) -> tuple[Tensor | None, ...]:
    """Capture the backward from ``outputs`` to ``inputs`` into ``bwd_graph``."""
    state = {"ended": False}
    torch.npu.synchronize()
    marked = _CaptureBackward.apply(bwd_graph, pool, state, *outputs)
    try:
        grads = torch.autograd.grad(
            outputs=marked,
            inputs=inputs,
            grad_outputs=grad_outputs,
            only_inputs=True,
            allow_unused=allow_unused,
        )
    except BaseException:
        # An aborted capture was ended by the runtime; drop whatever was recorded.
        bwd_graph.reset()
        raise
    if not state["ended"]:
        bwd_graph.reset()
        raise RuntimeError(
            "make_graphed_callables: the backward capture did not end on the thread that began it"
        )
    return grads


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

