"""mode="reduce-overhead" against Inductor without graphs and against npugraphs, in one process.

Launch-bound models, where the step time is host overhead (Python wrapper, dispatcher,
allocations) rather than arithmetic:

* ``linear_ln_gelu``: 24 x (Linear + LayerNorm + GELU), width 32, batch 4;
* ``many_small_ops``: the many-small-ops model of ``bench_graphs.py``;
* ``gpt2_decode``: one decode step (batch 1, one new token over a static KV cache of 32
  positions) of a tiny transformers GPT-2 (2 layers, width 64), when transformers imports.

For each model, inference and a training step (forward, backward) are timed as medians of
several steps after warm-up, for Inductor without graphs, ``backend="npugraphs"`` and
``mode="reduce-overhead"``, all in this process; reported as ratios (Inductor ÷
reduce-overhead, goal >= 1.5; npugraphs ÷ reduce-overhead, goal >= 1.3). Also:

* the replay cost per captured kernel launch: an NPU graph of N launches of a one-element
  Inductor kernel, replay time ÷ N (goal <= 0.5 µs), next to the same compiled calls made
  uncaptured;
* ``memory_allocated`` before and after 1,000 reduce-overhead replays.

    python bench/bench_reduce_overhead.py [--steps N] [--json] [--only NAME]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

import torch

import torch_npu  # noqa: F401  (registers the npu device)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class LinearLnGelu(torch.nn.Module):
    def __init__(self, width: int = 32, depth: int = 24):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.LayerNorm(width), torch.nn.GELU())
            for _ in range(depth)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _median(step: Callable[[], Any], steps: int, warmup: int = 5) -> float:
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _inference(fn: Callable, *args: Any) -> Callable[[], Any]:
    def step() -> Any:
        with torch.no_grad():
            return fn(*args)

    return step


def _training(fn: Callable, params: list, *args: Any) -> Callable[[], Any]:
    def step() -> Any:
        torch_npu.npu.mark_step_begin()
        for p in params:
            p.grad = None
        out = fn(*args)
        out = out.logits if hasattr(out, "logits") else out
        out.float().square().mean().backward()

    return step


def _gpt2_case() -> Callable[[], tuple] | str:
    """A maker of (model, args, kwargs) for one GPT-2 decode step, or why there is none."""
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
        from transformers.cache_utils import StaticCache
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        return f"transformers does not import here ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=64, vocab_size=128)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).npu().eval()

    def make() -> tuple:
        # A fresh static cache per compile: its tensors are static inputs updated in place.
        kwargs = dict(
            input_ids=torch.tensor([[5]], device="npu"),
            past_key_values=StaticCache(config=config, max_cache_len=32),
            cache_position=torch.tensor([7], device="npu"),
            use_cache=True,
        )
        return copy.deepcopy(model), (), kwargs

    return make


def _time_model(name: str, make: Callable[[], tuple[torch.nn.Module, tuple, dict]], steps: int, train: bool) -> dict:
    results: dict[str, float] = {}
    for mode in ("inductor", "npugraphs", "reduce-overhead"):
        torch._dynamo.reset()
        from torch_npu.compiler import graph_trees

        graph_trees.reset()
        model, args, kwargs = make()
        if mode == "inductor":
            compiled = torch.compile(model)
        elif mode == "npugraphs":
            compiled = torch.compile(model, backend="npugraphs")
        else:
            compiled = torch.compile(model, mode="reduce-overhead")
        fn = (lambda *a: compiled(*a, **kwargs).logits) if kwargs else compiled
        if train:
            params = [p for p in model.parameters() if p.requires_grad]
            results[mode] = _median(_training(fn, params, *args), steps)
        else:
            results[mode] = _median(_inference(fn, *args), steps)
    kind = "train" if train else "infer"
    return {
        f"{name}_{kind}_inductor_over_reduce_overhead": results["inductor"] / results["reduce-overhead"],
        f"{name}_{kind}_npugraphs_over_reduce_overhead": results["npugraphs"] / results["reduce-overhead"],
        f"{name}_{kind}_reduce_overhead_step_us": results["reduce-overhead"] * 1e6,
    }


def replay_cost_per_launch(launches: int = 200, steps: int = 100) -> dict:
    """An NPU graph of ``launches`` launches of one Inductor kernel on a 1-element tensor.

    The compiled function is called ``launches`` times inside one capture: each call
    records its one kernel launch (guards and wrappers run only at capture time), so the
    replay time divided by the launches is the replay cost of a launch (plus a 1-element
    kernel). The same calls made uncaptured are reported next to it.
    """
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: x.sin().mul_(0.5))
    x = torch.randn(1, device="npu")
    compiled(x)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        for _ in range(launches):
            out = compiled(x)
    n = g.num_kernel_launches()
    replay = _median(g.replay, steps)

    def uncaptured() -> None:
        for _ in range(launches):
            compiled(x)

    direct = _median(uncaptured, max(5, steps // 10))
    del out
    return {
        "replay_kernel_launches": n,
        "replay_us_per_launch": replay / n * 1e6,
        "uncaptured_us_per_compiled_call": direct / launches * 1e6,
    }


def memory_after_replays(replays: int = 1000) -> dict:
    torch._dynamo.reset()
    model = LinearLnGelu().npu()
    compiled = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(4, 32, device="npu")
    with torch.no_grad():
        for _ in range(3):
            compiled(x)
        before = torch.npu.memory_allocated()
        for _ in range(replays):
            compiled(x)
        after = torch.npu.memory_allocated()
    return {"memory_allocated_before": before, "memory_allocated_after_1000_replays": after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", choices=["linear_ln_gelu", "many_small_ops", "gpt2_decode"])
    args = parser.parse_args()
    from bench_graphs import ManySmallOps

    def linear_case() -> tuple:
        torch.manual_seed(0)
        return LinearLnGelu().npu(), (torch.randn(4, 32, device="npu"),), {}

    def small_ops_case() -> tuple:
        torch.manual_seed(0)
        return ManySmallOps().npu(), (torch.randn(8, 16, device="npu"),), {}

    cases: dict[str, Any] = {"linear_ln_gelu": linear_case, "many_small_ops": small_ops_case}
    gpt2 = _gpt2_case()
    results: dict[str, Any] = {"load_average_1min": os.getloadavg()[0]}
    if isinstance(gpt2, str):
        results["gpt2_decode_skipped"] = gpt2
    else:
        cases["gpt2_decode"] = gpt2
    for name, make in cases.items():
        if args.only and name != args.only:
            continue
        results.update(_time_model(name, make, args.steps, train=False))
        if name != "gpt2_decode":
            results.update(_time_model(name, make, args.steps, train=True))
    results.update(replay_cost_per_launch())
    results.update(memory_after_replays())
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for key, value in results.items():
            print(f"{key:55s} {value:.3f}" if isinstance(value, float) else f"{key:55s} {value}")


if __name__ == "__main__":
    main()
