"""Records the npu memory history of a few training steps and draws the memory plot the README shows.

The history is recorded with ``torch.npu.memory._record_memory_history`` from before the
model is built, so every allocation of the run is in it, and written as a snapshot in
``torch.cuda.memory``'s pickle format:

- ``--snapshot`` (default ``npu_snapshot.pickle``): open it at https://pytorch.org/memory_viz,
  or read it offline with ``python -m torch.cuda._memory_viz stats|trace|segments ...``, or
  turn it into PyTorch's interactive plot with
  ``python -m torch.cuda._memory_viz trace_plot npu_snapshot.pickle -d 0 -o plot.html``;
- ``--svg`` (optional): allocated and reserved npu memory over time, drawn here from the
  snapshot's trace, the training steps marked and the largest blocks live at the peak
  named with the line of Python that allocated them (for documents that cannot embed
  memory_viz's page).

    python demo/memory_plot.py [--snapshot npu_snapshot.pickle] [--svg npu_memory.svg]
"""
from __future__ import annotations

import argparse
import bisect
import html
import pickle
import time
from dataclasses import dataclass

import torch
from torch import nn

import torch_npu  # noqa: F401  (registers the npu device)

MiB = 1 << 20


def run(snapshot_path: str, steps: int = 3) -> list[float]:
    """Trains a small MLP for ``steps`` steps while recording; returns each step's start (us)."""
    torch.npu.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=100_000)
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(), nn.Linear(2048, 10)).npu()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)  # its state appears at the first step
        data = torch.randn(256, 512)
        starts: list[float] = []
        for _ in range(steps):
            starts.append(time.time() * 1e6)
            x = data.to("npu")
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        torch.npu.synchronize()
        torch.npu.memory._dump_snapshot(snapshot_path)
    finally:
        torch.npu.memory._record_memory_history(enabled=None)
    return starts


@dataclass
class Timeline:
    """Allocated and reserved bytes after each event of one device's trace."""

    times: list[float]
    allocated: list[int]
    reserved: list[int]
    peak_index: int
    live_at_peak: list[dict]  # the trace's alloc events still live at the peak, largest first


def timeline(snapshot: dict, device: int = 0) -> Timeline:
    """Replays the trace: ``alloc``/``free_completed`` move allocated, ``segment_*`` reserved.

    Memory the process held before recording started appears in no event; it is the
    snapshot's state at the dump minus what the trace changed, and the replay starts there."""
    trace = snapshot["device_traces"][device]
    segments = [s for s in snapshot["segments"] if s["device"] == device]
    net_alloc = sum(e["size"] if e["action"] == "alloc" else -e["size"]
                    for e in trace if e["action"] in ("alloc", "free_completed"))
    net_reserved = sum(e["size"] if e["action"] == "segment_alloc" else -e["size"]
                       for e in trace if e["action"] in ("segment_alloc", "segment_free"))
    held_alloc = sum(b["requested_size"] for s in segments for b in s["blocks"] if b["state"] == "active_allocated")
    held_reserved = sum(s["total_size"] for s in segments)
    times: list[float] = []
    allocated: list[int] = []
    reserved: list[int] = []
    live: dict[int, dict] = {}
    peak_index, peak_live = 0, []
    alloc_now, reserved_now = held_alloc - net_alloc, held_reserved - net_reserved
    for event in trace:
        action = event["action"]
        if action == "alloc":
            alloc_now += event["size"]
            live[event["addr"]] = event
        elif action == "free_completed":
            alloc_now -= event["size"]
            live.pop(event["addr"], None)
        elif action == "segment_alloc":
            reserved_now += event["size"]
        elif action == "segment_free":
            reserved_now -= event["size"]
        else:
            continue
        times.append(event["time_us"])
        allocated.append(alloc_now)
        reserved.append(reserved_now)
        if alloc_now > allocated[peak_index]:
            peak_index, peak_live = len(allocated) - 1, sorted(live.values(), key=lambda e: -e["size"])
    return Timeline(times, allocated, reserved, peak_index, peak_live)


def _user_frame(event: dict) -> str:
    """The innermost frame of the program itself (not torch's), as ``file:line (function)``."""
    for frame in event["frames"]:
        name = frame["filename"]
        if name.endswith(".py") and "/torch/" not in name:
            return f"{name.rsplit('/', 1)[-1]}:{frame['line']} ({frame['name']})"
    return "(no Python frame: allocated on a C++ thread, e.g. autograd's backward)"


def render_svg(snapshot_path: str, svg_path: str, step_starts: list[float] = (), width: int = 960) -> Timeline:
    """Draws allocated memory (area) and reserved memory (line) over the run."""
    with open(snapshot_path, "rb") as f:
        line = timeline(pickle.load(f))
    # As memory_viz's timeline, x is the event's position in the trace, not its time: a
    # slow host step (building the model on the host) would otherwise hide the rest.
    count = len(line.times)
    top, height, left, right = 30, 220, 60, width - 10
    ymax = max(line.reserved + line.allocated) * 1.08

    def x(index: float) -> float:
        return left + index / max(count - 1, 1) * (right - left)

    def y(b: int) -> float:
        return top + height - b / ymax * height

    def steps(values: list[int]) -> str:
        points = [f"{x(0):.1f},{y(0):.1f}"]
        for i, value in enumerate(values):
            points.append(f"{x(i):.1f},{y(values[i - 1] if i else 0):.1f}")
            points.append(f"{x(i):.1f},{y(value):.1f}")
        return " ".join(points)

    peak = line.allocated[line.peak_index]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 40 + 16 * 4}" '
        'font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="8" y="16" font-size="12">npu memory of {len(step_starts) or "the"} training steps '
        f'(torch.npu.memory history, {count} events): allocated (area), reserved by the caching '
        "allocator (line)</text>",
    ]
    for mib in range(0, int(ymax / MiB) + 1, max(int(ymax / MiB / 5), 1)):
        out.append(f'<line x1="{left}" x2="{right}" y1="{y(mib * MiB):.1f}" y2="{y(mib * MiB):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 6}" y="{y(mib * MiB) + 4:.1f}" text-anchor="end" fill="#666">{mib} MiB</text>')
    for i, start in enumerate(step_starts):
        first = bisect.bisect_left(line.times, start)
        out.append(f'<line x1="{x(first):.1f}" x2="{x(first):.1f}" y1="{top}" y2="{top + height}" stroke="#bbb" '
                   'stroke-dasharray="3,3"/>')
        out.append(f'<text x="{x(first) + 3:.1f}" y="{top + 10}" fill="#666">step {i + 1}</text>')
    out.append(f'<polygon points="{steps(line.allocated)} {x(count - 1):.1f},{y(0):.1f}" fill="#5b8def" fill-opacity="0.6"/>')
    out.append(f'<polyline points="{steps(line.reserved)}" fill="none" stroke="#f28e2b" stroke-width="1.5"/>')
    px, py = x(line.peak_index), y(peak)
    out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="#d62728"/>')
    out.append(f'<text x="{min(px + 6, right - 150):.1f}" y="{py - 4:.1f}" fill="#d62728">peak {peak / MiB:.1f} MiB</text>')
    legend_y = top + height + 20
    out.append(f'<text x="{left}" y="{legend_y}">largest blocks live at the peak (of '
               f'{len(line.live_at_peak)}), allocated by:</text>')
    for i, event in enumerate(line.live_at_peak[:4]):
        out.append(f'<text x="{left + 12}" y="{legend_y + 16 * (i + 1)}" fill="#333">{event["size"] / MiB:6.1f} MiB  '
                   f'{html.escape(_user_frame(event))}</text>')
    out.append("</svg>")
    with open(svg_path, "w") as f:
        f.write("\n".join(out))
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshot", default="npu_snapshot.pickle")
    parser.add_argument("--svg", default=None)
    args = parser.parse_args()
    starts = run(args.snapshot)
    print(f"snapshot written to {args.snapshot} (open it at https://pytorch.org/memory_viz)")
    if args.svg:
        line = render_svg(args.snapshot, args.svg, starts)
        print(f"memory plot drawn to {args.svg}: peak {line.allocated[line.peak_index] / MiB:.1f} MiB allocated, "
              f"{max(line.reserved) / MiB:.1f} MiB reserved")


if __name__ == "__main__":
    main()
