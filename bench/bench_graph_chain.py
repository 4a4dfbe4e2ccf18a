"""A chain of 20 pointwise ops on 1M elements: eager against a raw ``torch.npu.NPUGraph`` replay.

Each op reads and writes 4 MiB, so the kernels, the same cpu kernels either way, dominate
and replay can only remove the per-op host cost (Python, the dispatcher, the device
guard): the ratio stays near 1 by design, and shows what replay saves on memory-bound
work. Blocks of eager calls and of replays alternate; the figure is the median of the
ratios of back-to-back blocks (a change of load between blocks cancels out).

    python bench/bench_graph_chain.py [--blocks N] [--calls N] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

import torch_npu  # noqa: F401  (registers the npu device)

OPS = 20
ELEMENTS = 1 << 20


def chain(x: torch.Tensor) -> torch.Tensor:
    # 20 pointwise ops, each allocating its output as eager code does.
    for i in range(OPS // 2):
        x = x.mul(1.0001)
        x = x.add(0.5 if i % 2 else -0.5)
    return x


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=21, help="alternating timed blocks per side")
    parser.add_argument("--calls", type=int, default=20, help="calls per block")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    torch.set_num_threads(1)  # steadier on a shared machine; the same for both sides
    x = torch.randn(ELEMENTS, device="npu")
    stream = torch.npu.Stream()
    with torch.npu.stream(stream):  # warm-up on the capture stream, as CUDA graphs want
        chain(x)
    torch.npu.synchronize()
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        out = chain(x)
    graph.replay()
    torch.npu.synchronize()
    torch.testing.assert_close(out.cpu(), chain(x).cpu(), rtol=0, atol=0)  # replay computes the same

    def eager() -> None:
        chain(x)

    sides = {"eager": eager, "replay": graph.replay}
    for fn in sides.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in sides}
    ratios = []
    for b in range(args.blocks):
        for name in (("eager", "replay") if b % 2 == 0 else ("replay", "eager")):
            start = time.perf_counter()
            for _ in range(args.calls):
                sides[name]()
            torch.npu.synchronize()
            times[name].append((time.perf_counter() - start) / args.calls)
        ratios.append(times["eager"][-1] / times["replay"][-1])
    summary = {
        "eager_ms": statistics.median(times["eager"]) * 1e3,
        "replay_ms": statistics.median(times["replay"]) * 1e3,
        "eager_over_replay": statistics.median(ratios),
        "ratio_quartiles": statistics.quantiles(ratios, n=4)[::2],
        "nodes": graph.num_nodes(),
        "load_average": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{OPS} pointwise ops on {ELEMENTS} elements, median of {args.blocks} block pairs "
              f"(load {summary['load_average']:.1f}, {summary['nodes']} recorded nodes)")
        print(f"  eager {summary['eager_ms']:.3f} ms, replay {summary['replay_ms']:.3f} ms, "
              f"eager ÷ replay {summary['eager_over_replay']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
