"""What blocks capturing the npu graph Inductor is compiling, read from its post-grad graph's metadata.

Whether a graph can be replayed from an NPU graph depends on its tensors' devices (cpu
work is not recorded) and on sizes read from tensor data (unbacked symbols, from nonzero or
boolean masks). The compiled graph's ``device_types`` cannot tell the two apart: Inductor
counts the host-side size checks of a graph with unbacked sizes as cpu work. The post-grad
graph can: npu's post-grad pass notes here, per thread, the devices of its nodes' fake
values and whether any has an unbacked size, and the reduce-overhead policy takes them
when it wraps the compiled graph, in the same thread right after. A graph loaded from the
FX-graph cache runs no pass, so the facts are also kept by its FX-graph-cache key
(``cache_side_notes``).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import torch

from . import cache_side_notes

_KIND = "capture_facts"
_pending = threading.local()


@dataclass(frozen=True)
class CaptureFacts:
    """The devices a post-grad graph's values are on, and whether a size is read from data."""

    devices: frozenset[torch.device]
    data_dependent_shapes: bool

    def to_json(self) -> dict[str, Any]:
        return {"devices": sorted(map(str, self.devices)), "data_dependent_shapes": self.data_dependent_shapes}

    @classmethod
    def from_json(cls, note: Any) -> CaptureFacts | None:
        if not isinstance(note, dict) or not isinstance(note.get("devices"), list):
            return None
        return cls(frozenset(torch.device(d) for d in note["devices"]), bool(note.get("data_dependent_shapes")))


def of_graph(gm: torch.fx.GraphModule) -> CaptureFacts:
    from torch_npu.compiler.graph_trees.graph_facts import graph_devices, has_unbacked_sizes

    return CaptureFacts(frozenset(graph_devices(gm)), has_unbacked_sizes(gm))


def note(gm: torch.fx.GraphModule) -> None:
    """Keep the facts of ``gm`` for the graph being compiled in this thread."""
    from torch._inductor import config

    _pending.facts = of_graph(gm) if config.triton.cudagraphs else None


def take(cache_key: str | None) -> CaptureFacts | None:
    """The facts noted in this thread (kept under ``cache_key``), else those kept for ``cache_key``."""
    facts = getattr(_pending, "facts", None)
    _pending.facts = None
    if facts is not None:
        cache_side_notes.remember(_KIND, cache_key, facts.to_json())
        return facts
    return CaptureFacts.from_json(cache_side_notes.recall(_KIND, cache_key))
