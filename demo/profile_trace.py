"""Profiles two training steps on the npu and writes the trace the README shows.

Each step prefetches its next batch on a side stream (so the trace has two npu stream
rows), runs forward and backward and an optimizer step; the second step also replays an
NPU graph. The script prints the top ops by npu time and writes:

- ``--trace`` (default ``npu_trace.json``): the Chrome-trace JSON of torch.profiler; open
  it at https://ui.perfetto.dev or chrome://tracing, or in TensorBoard's profiler plugin;
- ``--svg`` (optional): a small timeline of that trace (host thread, then one row per
  npu stream), drawn here from the JSON, for documents that cannot embed a trace viewer.

    python demo/profile_trace.py [--trace npu_trace.json] [--svg npu_trace.svg]
"""
from __future__ import annotations

import argparse
import html
import json

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

import torch_npu  # noqa: F401  (registers the npu device)


def run(trace_path: str) -> profile:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10)).npu()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    copy_stream = torch.npu.Stream()
    main = torch.npu.current_stream()
    batches = [torch.randn(128, 256) for _ in range(3)]

    static_in = torch.zeros(128, 10, device="npu")
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        static_out = static_in.softmax(-1).log()

    def step(i: int, nxt: torch.Tensor) -> torch.Tensor:
        main.wait_stream(copy_stream)
        x = nxt
        x.record_stream(main)
        with torch.npu.stream(copy_stream):
            following = batches[(i + 1) % len(batches)].to("npu", non_blocking=True)
        logits = model(x)
        loss = logits.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        static_in.copy_(logits.detach())
        graph.replay()
        return following

    with torch.npu.stream(copy_stream):
        nxt = batches[0].to("npu", non_blocking=True)
    nxt = step(0, nxt)  # warm-up outside the profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU], profile_memory=True) as prof:
        for i in range(1, 3):
            with torch.profiler.record_function(f"train_step_{i}"):
                nxt = step(i, nxt)
        torch.npu.synchronize()
    prof.export_chrome_trace(trace_path)
    assert torch.isfinite(static_out.cpu()).all()
    return prof


def render_svg(trace_path: str, svg_path: str, width: int = 960) -> None:
    """Draws the host thread's top-level ops and every npu stream row of the trace."""
    events = json.load(open(trace_path))["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X" and e.get("dur", 0) > 0]
    npu = [e for e in spans if e.get("cat") in ("kernel", "gpu_memcpy")]
    steps = [e for e in spans if e.get("cat") == "user_annotation" and e["name"].startswith("train_step")]
    host_tid = steps[0]["tid"] if steps else None
    host = [e for e in spans if e.get("cat") == "cpu_op"]
    t0 = min(e["ts"] for e in npu + host)
    t1 = max(e["ts"] + e["dur"] for e in npu + host)
    scale = (width - 190) / (t1 - t0)

    rows: list[tuple[str, list[dict], int]] = [("host: train steps", steps, 0)]
    # Top-level ops of the main thread, then of the autograd thread (the backward).
    for tid in sorted({e["tid"] for e in host}, key=lambda t: t != host_tid):
        on_thread = [e for e in host if e["tid"] == tid]
        top = [e for e in on_thread
               if not any(p["ts"] <= e["ts"] and e["ts"] + e["dur"] <= p["ts"] + p["dur"] and p is not e for p in on_thread)]
        rows.append(("host: main thread ops" if tid == host_tid else "host: autograd thread ops", top, 1))
    for pid, tid in sorted({(e["pid"], e["tid"]) for e in npu}):
        label = f"NPU {pid} · {names.get((pid, tid), f'stream {tid}')}"
        rows.append((label, [e for e in npu if (e["pid"], e["tid"]) == (pid, tid)], 2))
    palette = {0: "#9e9e9e", 1: "#5b8def", 2: "#f28e2b"}
    row_h, top = 26, 28
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + row_h * len(rows) + 24}" '
        'font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="8" y="16" font-size="12">torch.profiler trace of two npu training steps '
        f'({(t1 - t0) / 1000:.1f} ms; kernels on the npu stream rows, linked to their host ops)</text>',
    ]
    for r, (label, items, kind) in enumerate(rows):
        y = top + r * row_h
        out.append(f'<text x="8" y="{y + 16}">{html.escape(label)}</text>')
        out.append(f'<line x1="180" x2="{width - 6}" y1="{y + row_h - 2}" y2="{y + row_h - 2}" stroke="#eee"/>')
        for e in items:
            x = 180 + (e["ts"] - t0) * scale
            w = max(e["dur"] * scale, 0.6)
            color = "#59a14f" if e.get("cat") == "gpu_memcpy" else palette[kind]
            out.append(
                f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" fill="{color}">'
                f'<title>{html.escape(e["name"])} ({e["dur"]:.0f} us)</title></rect>'
            )
            if w > 46:
                out.append(f'<text x="{x + 2:.1f}" y="{y + 16}" fill="white">{html.escape(e["name"][:int(w / 6)])}</text>')
    out.append(f'<text x="180" y="{top + row_h * len(rows) + 16}" fill="#666">0 ms</text>')
    out.append(f'<text x="{width - 60}" y="{top + row_h * len(rows) + 16}" fill="#666">{(t1 - t0) / 1000:.1f} ms</text>')
    out.append("</svg>")
    with open(svg_path, "w") as f:
        f.write("\n".join(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="npu_trace.json")
    parser.add_argument("--svg", default=None)
    args = parser.parse_args()
    prof = run(args.trace)
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=12))
    print(f"trace written to {args.trace} (open it at https://ui.perfetto.dev or chrome://tracing)")
    if args.svg:
        render_svg(args.trace, args.svg)
        print(f"timeline drawn to {args.svg}")


if __name__ == "__main__":
    main()
