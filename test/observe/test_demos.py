"""The two demos whose pictures the README shows: the profiler trace of npu training steps
and the memory plot of an npu memory history. Each runs here as a user would run it, and
what it writes is checked with PyTorch's own readers (the trace JSON, ``torch.cuda._memory_viz``)."""
from __future__ import annotations

import importlib.util
import json
import os
import pickle
import re
import sys
import xml.etree.ElementTree as ET

import torch
import torch.cuda._memory_viz as memory_viz

DEMO_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "demo")


def _demo(name: str):
    spec = importlib.util.spec_from_file_location(f"demo_{name}", os.path.join(DEMO_DIR, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as when run as a script: its dataclasses look it up
    spec.loader.exec_module(module)
    return module


def test_memory_plot_demo_makes_a_snapshot_memory_viz_reads(tmp_path):
    demo = _demo("memory_plot")
    snapshot_path, svg_path = str(tmp_path / "snap.pickle"), str(tmp_path / "memory.svg")
    starts = demo.run(snapshot_path, steps=2)
    assert len(starts) == 2
    torch.npu.memory._record_memory_history(enabled=None)  # the demo stopped recording itself
    with open(snapshot_path, "rb") as f:
        snapshot = pickle.load(f)
    assert "total_reserved" in memory_viz.segsum(snapshot)  # checks every segment's accounting
    # memory_viz names every traced allocation by its segment and offset: "b = a[0:4.0MiB]"
    # for a segment the trace saw reserved, "b = seg_2[0:4.0MiB]" for one this process had
    # cached before the demo started.
    assert re.search(r"^\w+ = \w+\[\d+:\d", memory_viz.trace(snapshot), re.MULTILINE)

    line = demo.render_svg(snapshot_path, svg_path, starts)
    params = 4 * (512 * 2048 + 2048 + 2048 * 2048 + 2048 + 2048 * 10 + 10)  # float32 bytes
    # After the first step the device holds the parameters, their gradients and AdamW's two
    # moments; the peak (inside a step) holds at least that.
    assert line.allocated[line.peak_index] >= 4 * params
    assert line.allocated[-1] >= 4 * params
    assert all(r >= a for r, a in zip(line.reserved, line.allocated))
    # Replaying the trace ends where the snapshot's blocks are (trace sizes are the requested ones).
    assert line.allocated[-1] == sum(b["requested_size"] for s in snapshot["segments"] for b in s["blocks"]
                                     if b["state"] == "active_allocated")
    frames = [demo._user_frame(e) for e in line.live_at_peak]
    assert any(f.startswith("memory_plot.py:") for f in frames), frames
    svg = ET.parse(svg_path).getroot()
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert f"peak {line.allocated[line.peak_index] / demo.MiB:.1f} MiB" in texts
    assert {"step 1", "step 2"} <= set(texts)


def test_profile_trace_demo_has_npu_stream_rows(tmp_path):
    demo = _demo("profile_trace")
    trace_path, svg_path = str(tmp_path / "trace.json"), str(tmp_path / "trace.svg")
    demo.run(trace_path)
    events = json.loads(open(trace_path).read())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    # Compute on the default stream; the next batch's copy on the prefetch stream.
    assert {e["tid"] for e in kernels} == {0}
    assert any(e["tid"] != 0 and e["name"] == "Memcpy HtoD" for e in copies), copies
    assert {"aten::addmm", "aten::_softmax"} <= {e["name"] for e in kernels}
    assert any(e.get("cat") == "user_annotation" and e["name"] == "train_step_2" for e in events)
    demo.render_svg(trace_path, svg_path)
    svg = ET.parse(svg_path).getroot()
    labels = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert any(label.startswith("NPU 0 · Stream") for label in labels), labels
