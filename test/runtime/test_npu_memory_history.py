"""Memory history and snapshots: ``torch.npu.memory._record_memory_history``, ``_snapshot``
and ``_dump_snapshot`` produce what ``torch.cuda.memory`` documents, and PyTorch's own
``torch.cuda._memory_viz`` reads it (its offline readers: ``segsum``, ``trace``, and
``memory``/``segments`` with a local flame-graph formatter)."""
from __future__ import annotations

import pickle
import re

import pytest
import torch
import torch.cuda._memory_viz as memory_viz
import torch.cuda.memory as cuda_memory

import torch_npu._C as _C

MiB = 1 << 20


def _documented_fields(typed_dict: str) -> set[str]:
    """Field names of one TypedDict in torch.cuda.memory._snapshot's docstring."""
    doc = cuda_memory._snapshot.__doc__
    body = doc.split(f"class {typed_dict}(TypedDict):", 1)[1]
    fields = set()
    for line in body.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("class ") or stripped.startswith("Args:"):
            break
        match = re.match(r"([a-z_]+): ", stripped)
        if match:
            fields.add(match.group(1))
    return fields


@pytest.fixture
def recording():
    torch.npu.memory._record_memory_history(enabled="all", context="all", stacks="python", clear_history=True)
    yield
    torch.npu.memory._record_memory_history(enabled=None)


def allocate_for_the_history(n: int) -> torch.Tensor:
    return torch.empty(n, dtype=torch.uint8, device="npu:0")


def _frame_names(frames: list[dict]) -> list[str]:
    return [f["name"] for f in frames]


def test_snapshot_has_the_documented_structure(recording):
    x = allocate_for_the_history(3 * MiB)
    address = x.untyped_storage().data_ptr()
    del x
    keep = allocate_for_the_history(1000)
    snapshot = torch.npu.memory._snapshot()

    assert _documented_fields("Snapshot") <= set(snapshot)
    assert {"segments", "device_traces", "allocator_settings"} <= set(snapshot)
    assert len(snapshot["device_traces"]) == torch.npu.device_count()
    segment_fields = _documented_fields("Segment")
    block_fields = _documented_fields("Block") - {"frames"}  # documented among the fields, checked below
    frame_fields = _documented_fields("Frame") - {"fx_node_op", "fx_node_name", "fx_original_trace"}
    assert {"address", "total_size", "stream", "segment_type", "blocks"} <= segment_fields  # the parser works
    for segment in snapshot["segments"]:
        assert segment_fields <= set(segment), segment_fields - set(segment)
        assert segment["segment_type"] in ("small", "large")
        assert sum(b["size"] for b in segment["blocks"]) == segment["total_size"]
        for block in segment["blocks"]:
            assert block_fields <= set(block) and "frames" in block
            assert block["state"] in ("active_allocated", "active_pending_free", "inactive")
            for frame in block["frames"]:
                assert frame_fields <= set(frame)

    # The live tensor's block carries the stack that allocated it.
    blocks = [b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == keep.untyped_storage().data_ptr()]
    assert len(blocks) == 1 and blocks[0]["state"] == "active_allocated" and blocks[0]["requested_size"] == 1000
    assert "allocate_for_the_history" in _frame_names(blocks[0]["frames"])
    assert "test_snapshot_has_the_documented_structure" in _frame_names(blocks[0]["frames"])

    trace_fields = _documented_fields("TraceEntry") - {"device_free"}
    trace = snapshot["device_traces"][0]
    actions = [(e["action"], e.get("addr")) for e in trace]
    assert ("alloc", address) in actions
    assert ("free_requested", address) in actions and ("free_completed", address) in actions
    for entry in trace:
        if entry["action"] == "oom":
            continue
        assert trace_fields <= set(entry), trace_fields - set(entry)
    alloc = next(e for e in trace if e["action"] == "alloc" and e["addr"] == address)
    assert alloc["size"] == 3 * MiB and "allocate_for_the_history" in _frame_names(alloc["frames"])
    free = next(e for e in trace if e["action"] == "free_requested" and e["addr"] == address)
    assert "test_snapshot_has_the_documented_structure" in _frame_names(free["frames"])  # context="all"
    assert any(e["action"] == "segment_alloc" for e in trace) or any(s["address"] for s in snapshot["segments"])
    del keep


def test_memory_viz_reads_npu_snapshots(recording, tmp_path):
    torch.npu.empty_cache()  # so that the 64 MiB request needs a new segment
    kept = [allocate_for_the_history(n) for n in (700, 5 * MiB, 64 * MiB)]
    del kept[1]
    path = tmp_path / "snapshot.pickle"
    torch.npu.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        snapshot = pickle.load(f)

    summary = memory_viz.segsum(snapshot)  # checks every segment's accounting, raises if wrong
    assert f"segments: {len(snapshot['segments'])}" in summary
    trace = memory_viz.trace(snapshot)
    assert "Device 0" in trace and "cudaMalloc(" in trace and "del " in trace

    def local_flamegraph(lines: str) -> str:
        return lines

    stacks = memory_viz.memory(snapshot, format_flamegraph=local_flamegraph)
    assert "allocate_for_the_history" in stacks and "active_allocated" in stacks
    per_segment = memory_viz.segments(snapshot, format_flamegraph=local_flamegraph)
    assert "seg_" in per_segment and "allocate_for_the_history" in per_segment
    del kept


def test_out_of_memory_is_recorded_with_its_stack(recording):
    _, total = torch.npu.mem_get_info(0)
    torch.npu.empty_cache()
    _C._set_memory_capacity(0, 64 * MiB)
    try:
        with pytest.raises(torch.OutOfMemoryError):
            allocate_for_the_history(128 * MiB)
    finally:
        _C._set_memory_capacity(0, total)
    trace = torch.npu.memory._snapshot()["device_traces"][0]
    oom = [e for e in trace if e["action"] == "oom"]
    assert len(oom) == 1 and oom[0]["size"] == 128 * MiB and "device_free" in oom[0]
    assert "allocate_for_the_history" in _frame_names(oom[0]["frames"])
    assert "raise OutOfMemoryError" in memory_viz.trace(torch.npu.memory._snapshot())


def test_recording_stops_and_history_options():
    torch.npu.memory._record_memory_history(enabled="all", stacks="python", max_entries=4)
    for _ in range(10):
        allocate_for_the_history(4096)
    assert len(torch.npu.memory._snapshot()["device_traces"][0]) == 4  # a ring buffer
    torch.npu.memory._record_memory_history(None)
    y = allocate_for_the_history(4096)
    snapshot = torch.npu.memory._snapshot()
    assert all(len(t) <= 1 for t in snapshot["device_traces"])  # at most the snapshot marker
    block = [b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == y.data_ptr()]
    assert block and block[0]["frames"] == []

    # The pre-2.1 boolean form, and skip_actions.
    torch.npu.memory._record_memory_history(True, trace_alloc_max_entries=100, trace_alloc_record_context=True)
    z = allocate_for_the_history(4096)
    assert any(e["action"] == "alloc" for e in torch.npu.memory._snapshot()["device_traces"][0])
    torch.npu.memory._record_memory_history(False)
    torch.npu.memory._record_memory_history("all", stacks="python", skip_actions=["alloc"])
    w = allocate_for_the_history(4096)
    del w
    actions = {e["action"] for e in torch.npu.memory._snapshot()["device_traces"][0]}
    assert "alloc" not in actions and "free_requested" in actions
    torch.npu.memory._record_memory_history(None)
    del y, z

    with pytest.raises(RuntimeError, match="expected enabled"):
        torch.npu.memory._record_memory_history(enabled="sometimes")
    with pytest.raises(RuntimeError, match="expected stacks"):
        torch.npu.memory._record_memory_history(stacks="cpp")
    with pytest.raises(RuntimeError, match="Unknown TraceEntry action"):
        torch.npu.memory._record_memory_history(skip_actions=["nothing"])
    torch.npu.memory._record_memory_history(None)


def test_mempool_snapshot_and_memory_snapshot():
    pool = torch.npu.MemPool()
    with torch.npu.use_mem_pool(pool):
        x = allocate_for_the_history(2 * MiB)
    segments = pool.snapshot()
    assert segments and all(s["segment_pool_id"] == pool.id for s in segments)
    assert any(b["address"] == x.data_ptr() for s in segments for b in s["blocks"])
    everything = torch.npu.memory_snapshot()
    assert any(s["segment_pool_id"] == pool.id for s in everything)
    assert any(s["segment_pool_id"] == (0, 0) for s in everything)
    del x
