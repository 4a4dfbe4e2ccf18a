"""NPU graphs against eager and Inductor on a model of many small ops, in one process.

With small tensors the step time is dominated by per-op host overhead (Python, the
dispatcher, the device guard), which replaying a recorded graph removes. Reported, as
medians of timed steps after warm-up:

* eager npu, ``backend="npugraphs"``, ``backend="inductor"`` (no graph capture), for an
  inference step and a training step (forward + backward);
* a raw ``torch.npu.NPUGraph`` replay of the eager step, and its cost per recorded node.

Target: npugraphs >= 2x eager on the inference step.

    python bench/bench_graphs.py [--steps N] [--json] [--no-inductor]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Callable

import torch

import torch_npu  # noqa: F401  (registers the npu device)


class ManySmallOps(torch.nn.Module):
    """A stack of tiny layers: each block is a handful of pointwise ops and a small matmul."""

    def __init__(self, width: int = 16, depth: int = 12):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        self.scales = torch.nn.ParameterList(torch.nn.Parameter(torch.ones(width)) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer, scale in zip(self.layers, self.scales):
            h = layer(x)
            h = torch.nn.functional.gelu(h, approximate="tanh") * scale
            x = x + torch.tanh(h) * 0.5 - h.sigmoid() * 0.1
        return x.sum(dim=-1)


def _median_step(step: Callable[[], object], steps: int) -> float:
    for _ in range(5):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _inference(model: Callable, x: torch.Tensor) -> Callable[[], object]:
    def step() -> object:
        with torch.no_grad():
            return model(x)

    return step


def _training(model: Callable, params: list[torch.nn.Parameter], x: torch.Tensor) -> Callable[[], object]:
    def step() -> object:
        torch_npu.npu.mark_step_begin()
        for p in params:
            p.grad = None
        loss = model(x).square().mean()
        loss.backward()
        return loss

    return step


def run(steps: int, with_inductor: bool) -> dict:
    torch.manual_seed(0)
    model = ManySmallOps().npu()
    params = list(model.parameters())
    x = torch.randn(8, 16, device="npu")
    results: dict[str, float] = {}

    results["eager_infer_s"] = _median_step(_inference(model, x), steps)
    results["eager_train_s"] = _median_step(_training(model, params, x), steps)

    graphs = torch.compile(model, backend="npugraphs")
    results["npugraphs_infer_s"] = _median_step(_inference(graphs, x), steps)
    results["npugraphs_train_s"] = _median_step(_training(graphs, params, x), steps)

    if with_inductor:
        torch._dynamo.reset()
        inductor = torch.compile(model, backend="inductor")
        results["inductor_infer_s"] = _median_step(_inference(inductor, x), steps)
        results["inductor_train_s"] = _median_step(_training(inductor, params, x), steps)

    # A raw graph of the eager inference step: replay cost per recorded node.
    g = torch.npu.NPUGraph()
    with torch.no_grad(), torch.npu.graph(g):
        model(x)
    results["raw_replay_s"] = _median_step(g.replay, steps)
    nodes = g.num_nodes()
    results["raw_replay_nodes"] = nodes
    results["raw_replay_per_node_us"] = results["raw_replay_s"] / nodes * 1e6

    results["npugraphs_vs_eager_infer"] = results["eager_infer_s"] / results["npugraphs_infer_s"]
    results["npugraphs_vs_eager_train"] = results["eager_train_s"] / results["npugraphs_train_s"]
    if with_inductor:
        results["npugraphs_vs_inductor_infer"] = results["inductor_infer_s"] / results["npugraphs_infer_s"]
        results["npugraphs_vs_inductor_train"] = results["inductor_train_s"] / results["npugraphs_train_s"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-inductor", action="store_true")
    args = parser.parse_args()
    results = run(args.steps, not args.no_inductor)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for key, value in results.items():
        if key.endswith("_s"):
            print(f"{key:32s} {value * 1e3:9.3f} ms")
        else:
            print(f"{key:32s} {value:9.2f}")
    ok = results["npugraphs_vs_eager_infer"] >= 2.0
    print(f"target npugraphs >= 2x eager (inference): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
