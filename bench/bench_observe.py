"""Cost of watching the npu: torch.profiler with npu activity, and the stream sanitizer.

Both figures are ratios of medians measured side by side in one process, alternating the
watched and unwatched runs:

- profiling: a small model's forward+backward, 50 passes per sample, inside
  ``torch.profiler.profile(activities=[CPU, NPU])`` against the same passes unprofiled
  (budget <= 2x). The time is that of the profiled region itself, what a profiled
  program pays while it runs; for reference the script also times the same region
  profiled with CPU activity only (PyTorch's own per-op recording, which npu profiling
  includes) and the post-processing after it (``key_averages()``: PyTorch's Python,
  proportional to the number of events, paid once per profile; the garbage collection of
  its event tree is done there too, not left to fall inside the next timed region);
- sanitizer: a multi-stream training step (inputs prefetched on a side stream, events,
  ``record_stream``) with the sanitizer on against off (budget <= 3x). Off, the runtime's
  hooks are one relaxed atomic load each: ``bench_eager.py`` measures that path.

    python bench/bench_observe.py [--samples N] [--json]
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

import torch_npu  # noqa: F401  (registers the npu device)
from torch_npu.npu import _stream_sanitizer


def _small_model() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
    ).npu()
    return model, torch.randn(32, 64).npu()


def _passes(model: torch.nn.Module, x: torch.Tensor, n: int) -> None:
    for _ in range(n):
        model(x).square().mean().backward()
    torch.npu.synchronize()


def profiling_ratio(samples: int, passes: int = 50) -> dict[str, float]:
    model, x = _small_model()
    _passes(model, x, passes)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]):
        _passes(model, x, 1)  # Kineto's one-time initialisation is not part of the figure
    post: list[float] = []

    def plain() -> float:
        start = time.perf_counter()
        _passes(model, x, passes)
        return time.perf_counter() - start

    def profiled(activities: list[ProfilerActivity]) -> float:
        prof = profile(activities=activities)
        prof.__enter__()
        start = time.perf_counter()
        _passes(model, x, passes)
        elapsed = time.perf_counter() - start
        prof.__exit__(None, None, None)
        if ProfilerActivity.NPU in activities:
            begin = time.perf_counter()
            prof.key_averages()
            post.append(time.perf_counter() - begin)
        # The event tree of a profile is cyclic garbage of tens of thousands of objects:
        # collect it here, as part of the post-processing, not inside the next timed region.
        del prof
        gc.collect()
        return elapsed

    result = _ratio(plain, lambda: profiled([ProfilerActivity.CPU, ProfilerActivity.NPU]), samples)
    cpu_only = _ratio(plain, lambda: profiled([ProfilerActivity.CPU]), samples)
    result["cpu_only_ratio"] = cpu_only["ratio"]
    result["post_processing_ms"] = statistics.median(post) * 1e3
    return result


class _TrainingStep:
    """A training step that prefetches its next batch on a side stream, correctly synced."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).npu()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.copy_stream = torch.npu.Stream()
        self.batches = [torch.randn(32, 64) for _ in range(8)]

    def __call__(self) -> None:
        main = torch.npu.current_stream()
        with torch.npu.stream(self.copy_stream):
            nxt = self.batches[0].to("npu", non_blocking=True)
        for i in range(len(self.batches)):
            main.wait_stream(self.copy_stream)
            x = nxt
            x.record_stream(main)
            if i + 1 < len(self.batches):
                with torch.npu.stream(self.copy_stream):
                    nxt = self.batches[i + 1].to("npu", non_blocking=True)
            loss = self.model(x).square().mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        torch.npu.synchronize()


def sanitizer_ratio(samples: int) -> dict[str, float]:
    step = _TrainingStep()
    step()

    def off() -> float:
        _stream_sanitizer.disable_npu_sanitizer()
        start = time.perf_counter()
        step()
        return time.perf_counter() - start

    def on() -> float:
        _stream_sanitizer.enable_npu_sanitizer()
        start = time.perf_counter()
        step()
        elapsed = time.perf_counter() - start
        _stream_sanitizer.check()
        _stream_sanitizer.disable_npu_sanitizer()
        return elapsed

    return _ratio(off, on, samples)


def _ratio(base: Callable[[], float], watched: Callable[[], float], samples: int) -> dict[str, float]:
    base(), watched()  # warm-up
    times: dict[str, list[float]] = {"base": [], "watched": []}
    for i in range(samples):
        order = (("base", base), ("watched", watched)) if i % 2 == 0 else (("watched", watched), ("base", base))
        for key, fn in order:
            times[key].append(fn())
    b, w = statistics.median(times["base"]), statistics.median(times["watched"])
    return {"base_ms": b * 1e3, "watched_ms": w * 1e3, "ratio": w / b}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=9, help="timed runs of each kind")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    # One intra-op thread: on a loaded machine, a parallel region can wait for a
    # descheduled worker for a whole time slice, which would swamp both sides.
    torch.set_num_threads(1)
    results = {
        "profiler (budget 2x)": {**profiling_ratio(args.samples), "budget": 2.0},
        "sanitizer (budget 3x)": {**sanitizer_ratio(args.samples), "budget": 3.0},
    }
    for r in results.values():
        r["ok"] = r["ratio"] <= r["budget"]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for name, r in results.items():
            print(f"{name:24s} {r['base_ms']:9.2f} ms -> {r['watched_ms']:9.2f} ms  ratio {r['ratio']:.2f}"
                  f"  {'ok' if r['ok'] else 'OVER BUDGET'}")
        prof = results["profiler (budget 2x)"]
        print(f"{'':24s} CPU-only profiling of the same region: ratio {prof['cpu_only_ratio']:.2f}; "
              f"key_averages() afterwards: {prof['post_processing_ms']:.0f} ms")
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
