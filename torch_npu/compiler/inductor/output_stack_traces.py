"""The user's stack of each output of the npu graph Inductor is compiling, for the graph trees.

The overwritten-output error of graph trees quotes where the output was produced, as
CUDA's does. Inductor keeps those stacks (the FX output node's ``output_stack_traces``)
only in the ``cudagraph_info`` of graphs it wraps in its own CUDA graphs, and it does not
wrap npu graphs. So npu's post-grad pass notes them here, per thread, while
``mode="reduce-overhead"`` is on, and the reduce-overhead policy takes them when it wraps
the compiled graph, in the same thread right after. A graph loaded from the FX-graph
cache runs no pass, so the stacks are also kept by the graph's FX-graph-cache key
(``remember``/``recall``, through ``cache_side_notes``), as Inductor keeps CUDA's in its
cache entry.
"""
from __future__ import annotations

import threading
from typing import Any

from . import cache_side_notes

_KIND = "output_stacks"
_pending = threading.local()


def note(gm: Any) -> None:
    """Keep the stacks of ``gm``'s outputs for the graph being compiled in this thread."""
    from torch._inductor import config

    if not config.triton.cudagraphs:
        _pending.traces = None
        return
    output = next((n for n in reversed(gm.graph.nodes) if n.op == "output"), None)
    if output is None:
        _pending.traces = None
        return
    traces = output.meta.get("output_stack_traces")
    if traces is None:
        values = output.args[0] if isinstance(output.args[0], (list, tuple)) else (output.args[0],)
        traces = [getattr(v, "meta", {}).get("stack_trace") for v in values]
    _pending.traces = list(traces)


def take(num_outputs: int | None) -> list[str | None] | None:
    """The stacks noted in this thread, if they are for a graph of ``num_outputs`` outputs."""
    traces = getattr(_pending, "traces", None)
    _pending.traces = None
    if traces is None or (num_outputs is not None and len(traces) != num_outputs):
        return None
    return traces


def remember(cache_key: str | None, traces: list[str | None]) -> None:
    """Keep ``traces`` for later loads of the compiled graph with this FX-graph-cache key."""
    cache_side_notes.remember(_KIND, cache_key, traces)


def recall(cache_key: str | None, num_outputs: int | None) -> list[str | None] | None:
    """The stacks kept for this FX-graph-cache key, if any (and for ``num_outputs`` outputs)."""
    traces = cache_side_notes.recall(_KIND, cache_key)
    if not isinstance(traces, list) or not all(t is None or isinstance(t, str) for t in traces):
        return None
    if num_outputs is not None and len(traces) != num_outputs:
        return None
    return traces
