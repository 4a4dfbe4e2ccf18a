"""What the graph trees need to know about an ATen graph before capturing it.

Which device it runs on, whether it can be captured at all (one npu device, no cpu
tensors: cpu work would run once at capture time and never at replay; no sizes read from
tensor data, which a replay of fixed shapes cannot follow -- an eager ATen graph meets
those as a failed capture, at the op that syncs), and which inputs it mutates in
place (those must be written back when replay works on copies). ``capture_blocker`` is the
one set of capture rules: the ``npugraphs`` backend and npugraph_ex feed it an ATen
graph's node metadata, ``mode="reduce-overhead"`` what Inductor's post-grad pass noted
from the same metadata (``torch_npu.compiler.inductor.capture_facts``).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

DEVICE_TYPE = "npu"


def _val(node: torch.fx.Node) -> Any:
    return node.meta.get("val", node.meta.get("fake_result"))


def graph_devices(gm: torch.fx.GraphModule) -> set[torch.device]:
    """Devices of the tensors the graph computes or uses (meta tensors excluded).

    An input no node uses is no work on its device, as Inductor counts it too: compiled
    autograd hands its graph the sizes it specialises on as empty cpu tensors, unused once
    traced, and they must not keep its backward graph from being captured.
    """
    devices: set[torch.device] = set()
    for node in gm.graph.nodes:
        if node.op == "placeholder" and not node.users:
            continue
        val = _val(node)
        vals = val if isinstance(val, (list, tuple)) else (val,)
        for v in vals:
            if isinstance(v, torch.Tensor) and v.device.type != "meta":
                devices.add(v.device)
    return devices


CPU_TENSORS = "the graph uses cpu tensors (cpu work is not recorded and would not re-run at replay)"
DATA_DEPENDENT_SHAPES = (
    "the graph has data-dependent output shapes (sizes read from tensor data, as nonzero or boolean "
    "indexing produce), which a replay of fixed shapes cannot follow"
)


def has_unbacked_sizes(gm: torch.fx.GraphModule) -> bool:
    """Whether a value of the graph has a size read from tensor data (nonzero, boolean masks)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    from torch.utils._pytree import tree_leaves

    for node in gm.graph.nodes:
        for v in tree_leaves(_val(node)):
            if isinstance(v, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)) and free_unbacked_symbols(v):
                return True
    return False


def capture_blocker(
    devices: set[torch.device],
    *,
    data_dependent_shapes: bool = False,
    compiler_reason: str | None = None,
) -> str | None:
    """Why a graph on ``devices`` cannot be captured as one NPU graph, or None if it can.

    The one set of capture rules, for every way a graph reaches the trees (the
    ``npugraphs`` backend, npugraph_ex, ``mode="reduce-overhead"``); ``compiler_reason``
    is a reason the compiler gave against capture beyond the devices (Inductor's
    ``disabled_cudagraphs_reason`` other than its device ones).
    """
    if any(d.type == "cpu" for d in devices):
        return CPU_TENSORS
    if data_dependent_shapes:
        return DATA_DEPENDENT_SHAPES
    npu = {d for d in devices if d.type == DEVICE_TYPE}
    others = devices - npu
    if others:
        return f"the graph uses non-npu devices {sorted(map(str, others))}"
    if len({d.index or 0 for d in npu}) > 1:
        return f"the graph spans several npu devices {sorted(map(str, npu))}"
    if not npu:
        return "the graph has no npu tensors"
    return compiler_reason or None


def graph_capture_blocker(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> str | None:
    """``capture_blocker`` for an ATen graph and the inputs it is called with."""
    devices = graph_devices(gm) | {
        x.device for x in example_inputs if isinstance(x, torch.Tensor) and x.device.type != "meta"
    }
    # Data-dependent sizes are left to the capture itself here: the eager ops that read
    # them synchronize with the host, which fails the capture and names the op.
    return capture_blocker(devices)


def graph_device_index(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> int:
    """Index of the one npu device the graph runs on (call after ``graph_capture_blocker``)."""
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type == DEVICE_TYPE:
            return x.device.index or 0
    for d in graph_devices(gm):
        if d.type == DEVICE_TYPE:
            return d.index or 0
    return 0


def mutated_input_indices(gm: torch.fx.GraphModule) -> set[int]:
    """Indices of placeholders whose memory an op of the graph writes to."""
    by_storage: dict[StorageWeakRef, set[int]] = defaultdict(set)
    index = 0
    mutated: set[int] = set()
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            val = _val(node)
            if isinstance(val, torch.Tensor):
                by_storage[StorageWeakRef(val.untyped_storage())].add(index)
            index += 1
        elif node.op == "call_function" and hasattr(node.target, "_schema"):
            for i, arg in enumerate(node.target._schema.arguments):
                if not (arg.alias_info and arg.alias_info.is_write):
                    continue
                value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
                values = value if isinstance(value, (list, tuple)) else (value,)
                for v in values:
                    if isinstance(v, torch.fx.Node) and isinstance(_val(v), torch.Tensor):
                        mutated |= by_storage.get(StorageWeakRef(_val(v).untyped_storage()), set())
    return mutated
