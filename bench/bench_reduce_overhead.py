"""mode="reduce-overhead" against Inductor without graphs and against npugraphs, in one process.

Launch-bound models, where the step time is host overhead (Python wrapper, dispatcher,
allocations) rather than arithmetic:

* ``linear_ln_gelu``: 24 x (Linear + LayerNorm + GELU), width 32, batch 4;
* ``many_small_ops``: the many-small-ops model of ``bench_graphs.py``;
* ``gpt2_decode``: one decode step (batch 1, one new token over a static KV cache of 32
  positions) of a tiny transformers GPT-2 (2 layers, width 64); training runs the same
  step with gradients.

For each model, inference and a training step (``mark_step_begin``, forward, backward)
run for Inductor without graphs, ``backend="npugraphs"`` and ``mode="reduce-overhead"``,
all three compiled side by side in this process and warmed up first; they are then timed
in interleaved blocks (each lasting about 40 ms of the slowest variant), and each figure is the median over blocks of the ratio of
median step times measured within a block (Inductor ÷ reduce-overhead, goal >= 1.5; npugraphs ÷ reduce-overhead,
goal >= 1.3), with its interquartile range, and the recompiles, re-records and eager runs
seen while timing (all must be 0). Also:

* the replay cost per captured kernel launch: an NPU graph of N launches of a one-element
  Inductor kernel, replay time ÷ N (goal <= 0.5 µs), next to the same compiled calls made
  uncaptured;
* ``memory_allocated`` before and after 1,000 reduce-overhead replays.

* with ``--breakdown``, what a reduce-overhead training step is made of (graph-tree calls,
  their bare replays warm and with cold caches, the rest of the step, which is
  PyTorch's), both training steps with the backward on the calling thread instead of
  autograd's device thread, and a trivial backward on npu (device thread) against cpu.

* with ``--compiled-autograd``, a fourth training variant: reduce-overhead with compiled
  autograd (``torch._dynamo.compiled_autograd._enable(torch.compile(mode="reduce-overhead"))``
  around the step), whose backward is one graph replayed on the calling thread; its figure
  is Inductor ÷ that variant.

    python bench/bench_reduce_overhead.py [--blocks N] [--block-steps N] [--json] [--only NAME] [--breakdown]
        [--compiled-autograd]
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


MODES = ("inductor", "npugraphs", "reduce-overhead")
# Training only, with --compiled-autograd: reduce-overhead whose backward compiled autograd
# traces into one graph, itself compiled with reduce-overhead and replayed on the calling
# thread (no hand-off to autograd's device thread).
COMPILED_AUTOGRAD = "reduce-overhead+compiled-autograd"


def _median(step: Callable[[], Any], steps: int, warmup: int = 5) -> float:
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _inference(fn: Callable, *args: Any, before: Callable[[], None] | None = None) -> Callable[[], Any]:
    def step() -> Any:
        if before is not None:
            before()
        with torch.no_grad():
            return fn(*args)

    return step


def _training(fn: Callable, params: list, *args: Any, compiled_autograd: bool = False) -> Callable[[], Any]:
    backward_compiler = torch.compile(mode="reduce-overhead") if compiled_autograd else None

    def step() -> Any:
        torch_npu.npu.mark_step_begin()
        for p in params:
            p.grad = None
        if backward_compiler is None:
            out = fn(*args)
            out = out.logits if hasattr(out, "logits") else out
            out.float().square().mean().backward()
            return
        from torch._dynamo import compiled_autograd

        with compiled_autograd._enable(backward_compiler):
            out = fn(*args)
            out = out.logits if hasattr(out, "logits") else out
            out.float().square().mean().backward()

    return step


def _define_torchvision_schemas() -> None:
    # The torchvision wheel here is a CUDA build whose C++ operators do not load; its
    # Python code (imported by transformers) registers fake kernels for these two
    # operators at import, which needs their schemas.
    global _TORCHVISION_LIB
    missing = [
        schema
        for name, schema in (
            ("nms", "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"),
            ("qnms", "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"),
        )
        if not torch._C._dispatch_has_kernel(f"torchvision::{name}") and not hasattr(torch.ops.torchvision, name)
    ]
    if missing:
        _TORCHVISION_LIB = torch.library.Library("torchvision", "FRAGMENT")
        for schema in missing:
            _TORCHVISION_LIB.define(schema)


_TORCHVISION_LIB = None


def _gpt2_case() -> Callable[[], tuple] | str:
    """A maker of (model, args, kwargs) for one GPT-2 decode step, or why there is none."""
    try:
        _define_torchvision_schemas()
        from transformers import GPT2Config, GPT2LMHeadModel
        from transformers.cache_utils import StaticCache
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        return f"transformers does not import here ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    # No dropout: every variant computes the same thing at every step.
    config = GPT2Config(
        n_layer=2, n_embd=64, n_head=2, n_positions=64, vocab_size=128, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).npu()

    def make(train: bool) -> tuple:
        if train:
            # A training step of the same model at batch 1 (8 tokens, no KV cache: a
            # cache written under autograd would chain every step's graph to the last).
            return copy.deepcopy(model), (), dict(input_ids=torch.arange(8, device="npu")[None] % 128), None
        # A fresh model and static cache per compile: the cache's tensors are static
        # inputs updated in place, and each compiled variant needs its own.
        cache = StaticCache(config=config, max_cache_len=32)
        kwargs = dict(
            input_ids=torch.tensor([[5]], device="npu"),
            past_key_values=cache,
            cache_position=torch.tensor([7], device="npu"),
            use_cache=True,
        )

        def same_position() -> None:
            # The static cache counts the tokens written (cumulative_length, a device
            # tensor) and writes at that count: set it back so that every timed step
            # is the same decode step at position 7 (one tiny eager op per layer).
            for layer in cache.layers:
                if layer.is_initialized:
                    layer.cumulative_length.fill_(7)

        return copy.deepcopy(model), (), kwargs, same_position

    return make


def _compile(model: torch.nn.Module, mode: str) -> Callable:
    if mode == COMPILED_AUTOGRAD:
        mode = "reduce-overhead"
    if mode == "inductor":
        return torch.compile(model)
    if mode == "npugraphs":
        return torch.compile(model, backend="npugraphs")
    return torch.compile(model, mode="reduce-overhead")


def _graph_counts() -> dict[str, int]:
    from torch._dynamo.utils import counters

    from torch_npu.compiler import graph_trees

    stats = [m.stats for m in graph_trees.managers()]
    return {
        "frames_compiled": counters["stats"]["unique_graphs"],
        "records": sum(s["records"] for s in stats),
        "eager_runs": sum(s["eager_runs"] for s in stats),
        "replays": sum(s["replays"] for s in stats),
    }


def _time_model(
    name: str,
    make: Callable[[bool], tuple[torch.nn.Module, tuple, dict, Any]],
    blocks: int,
    block_steps: int,
    train: bool,
    compiled_autograd: bool = False,
) -> dict:
    """All three variants compiled side by side, then timed in interleaved blocks.

    Each block times ``block_steps`` steps of every variant back to back (the order
    rotating from block to block); a ratio of the variants' median step times is taken
    within each block, so a change of machine load between blocks cancels out, and the
    figure is the median of the blocks' ratios. The median step, not the block's mean:
    on a shared machine a step now and then loses the CPU for a scheduling quantum (ms,
    where a step takes 0.1-2 ms), and which variant's block catches more of those decided
    a mean's ratio (``_block_means``, the ratio of means, is reported next to it). Recompiles and re-records during the timed blocks are counted and reported:
    a timed step must be a replay.
    """
    torch._dynamo.reset()
    from torch_npu.compiler import graph_trees

    graph_trees.reset()
    steps: dict[str, Callable[[], Any]] = {}
    modes = MODES + ((COMPILED_AUTOGRAD,) if train and compiled_autograd else ())
    for mode in modes:
        model, args, kwargs, before = make(train)
        compiled = _compile(model, mode)
        fn = (lambda *a, c=compiled, kw=kwargs: c(*a, **kw).logits) if kwargs else compiled
        if train:
            params = [p for p in model.parameters() if p.requires_grad]
            steps[mode] = _training(fn, params, *args, compiled_autograd=mode == COMPILED_AUTOGRAD)
        else:
            steps[mode] = _inference(fn, *args, before=before)
    # Warm-up: compile, warm up, record; then some replays so caches settle.
    for step in steps.values():
        for _ in range(8):
            step()
    # A block must last much longer than a scheduling quantum of a loaded machine
    # (several ms), or one descheduling decides a whole block's ratio: size blocks to
    # about 40 ms of the slowest variant.
    slowest = 0.0
    for step in steps.values():
        t0 = time.perf_counter()
        for _ in range(3):
            step()
        slowest = max(slowest, (time.perf_counter() - t0) / 3)
    block_steps = max(block_steps, int(0.04 / max(slowest, 1e-6)))
    before = _graph_counts()
    ratios: dict[str, list[float]] = {"inductor": [], "npugraphs": []}
    mean_ratios: dict[str, list[float]] = {"inductor": [], "npugraphs": []}
    ca_ratios: list[float] = []
    ro_times = []
    for b in range(blocks):
        order = modes[b % len(modes) :] + modes[: b % len(modes)]
        medians, means = {}, {}
        for mode in order:
            step = steps[mode]
            times = []
            for _ in range(block_steps):
                t0 = time.perf_counter()
                step()
                times.append(time.perf_counter() - t0)
            medians[mode] = statistics.median(times)
            means[mode] = statistics.fmean(times)
        for other in ratios:
            ratios[other].append(medians[other] / medians["reduce-overhead"])
            mean_ratios[other].append(means[other] / means["reduce-overhead"])
        if COMPILED_AUTOGRAD in medians:
            ca_ratios.append(medians["inductor"] / medians[COMPILED_AUTOGRAD])
        ro_times.append(medians["reduce-overhead"])
    after = _graph_counts()
    kind = "train" if train else "infer"

    def spread(values: list[float]) -> str:
        if len(values) < 2:  # one block has no spread
            return f"{values[0]:.2f}..{values[0]:.2f}"
        q = statistics.quantiles(values, n=4)
        return f"{q[0]:.2f}..{q[2]:.2f}"

    with_compiled_autograd = (
        {
            f"{name}_{kind}_inductor_over_reduce_overhead_compiled_autograd": statistics.median(ca_ratios),
            f"{name}_{kind}_inductor_over_reduce_overhead_compiled_autograd_iqr": spread(ca_ratios),
        }
        if ca_ratios
        else {}
    )
    return {
        **with_compiled_autograd,
        f"{name}_{kind}_inductor_over_reduce_overhead": statistics.median(ratios["inductor"]),
        f"{name}_{kind}_inductor_over_reduce_overhead_iqr": spread(ratios["inductor"]),
        f"{name}_{kind}_npugraphs_over_reduce_overhead": statistics.median(ratios["npugraphs"]),
        f"{name}_{kind}_npugraphs_over_reduce_overhead_iqr": spread(ratios["npugraphs"]),
        f"{name}_{kind}_inductor_over_reduce_overhead_block_means": statistics.median(mean_ratios["inductor"]),
        f"{name}_{kind}_npugraphs_over_reduce_overhead_block_means": statistics.median(mean_ratios["npugraphs"]),
        f"{name}_{kind}_reduce_overhead_step_us": statistics.median(ro_times) * 1e6,
        f"{name}_{kind}_steps_per_block": block_steps,
        f"{name}_{kind}_recompiles_records_eager_runs_while_timed": (
            f"{after['frames_compiled'] - before['frames_compiled']}, {after['records'] - before['records']}, "
            f"{after['eager_runs'] - before['eager_runs']}"
        ),
    }


def training_breakdown(name: str, make: Callable[[bool], tuple], rounds: int = 15) -> dict:
    """What a reduce-overhead training step is made of, next to Inductor's step.

    The graph-tree calls (every compiled graph's call through the NPU graph trees: release,
    copies, replay, hand-out) are timed inside the step; their bare replays apart. The
    rest of the step is PyTorch's and the same with or without graphs (Dynamo's guards,
    AOT autograd's wrappers, the autograd engine and its device thread, the eager loss),
    which bounds the speed-up: ``bound_zero_cost_calls`` is Inductor's step over that rest.
    Bare replays are timed warm and with cold caches (as inside a step, after PyTorch's
    share of it); the bounds with calls as cheap as either follow.
    """
    from torch_npu.compiler.graph_trees.tree_manager import GraphFunction

    torch._dynamo.reset()
    from torch_npu.compiler import graph_trees

    graph_trees.reset()
    steps = {}
    for mode in ("inductor", "reduce-overhead"):
        model, args, kwargs, _ = make(True)
        compiled = _compile(model, mode)
        fn = (lambda *a, c=compiled, kw=kwargs: c(*a, **kw).logits) if kwargs else compiled
        steps[mode] = _training(fn, [p for p in model.parameters() if p.requires_grad], *args)
        for _ in range(8):
            steps[mode]()
    calls: dict[Any, list[float]] = {}
    run = GraphFunction._run

    def timed_run(self: Any, a: list) -> Any:
        t0 = time.perf_counter()
        try:
            return run(self, a)
        finally:
            calls.setdefault(self, []).append(time.perf_counter() - t0)

    GraphFunction._run = timed_run  # this process only, for the measurement
    try:
        for _ in range(50):
            steps["reduce-overhead"]()
    finally:
        GraphFunction._run = run
    call_s = sum(statistics.median(v) for v in calls.values())
    graphs = [g for fn in calls for gs in fn._graphs.values() for g in gs[:1]]
    replay_s = sum(_median(g.graph.replay, 50) for g in graphs)
    # Inside a step a replay starts with caches holding PyTorch's share of the step, not
    # the graph's weights and activations: the same replays after overwriting 8 MiB.
    evict = torch.ones(2 << 20)

    def cold(g: Any) -> Callable[[], None]:
        def replay() -> None:
            evict.add_(1)
            t0 = time.perf_counter()
            g.graph.replay()
            cold_times.append(time.perf_counter() - t0)

        return replay

    cold_replay_s = 0.0
    for g in graphs:
        cold_times: list[float] = []
        _median(cold(g), 50)
        cold_replay_s += statistics.median(cold_times)
    ind, ro = [], []
    for _ in range(rounds):
        ind.append(_median(steps["inductor"], 10, warmup=1))
        ro.append(_median(steps["reduce-overhead"], 10, warmup=1))
    i, r = statistics.median(ind), statistics.median(ro)
    # The same steps with the backward run on the calling thread, as it is for cpu
    # tensors: what autograd's device thread (two cross-thread wake-ups per backward)
    # costs each variant on this machine.
    ind_st, ro_st = [], []
    with torch.autograd.set_multithreading_enabled(False):
        for _ in range(rounds):
            ind_st.append(_median(steps["inductor"], 10, warmup=1))
            ro_st.append(_median(steps["reduce-overhead"], 10, warmup=1))
    i_st, r_st = statistics.median(ind_st), statistics.median(ro_st)
    rest = r - call_s
    return {
        f"{name}_train_breakdown_inductor_step_us": i * 1e6,
        f"{name}_train_breakdown_reduce_overhead_step_us": r * 1e6,
        f"{name}_train_breakdown_graph_tree_calls_us": call_s * 1e6,
        f"{name}_train_breakdown_bare_replays_us": replay_s * 1e6,
        f"{name}_train_breakdown_bare_replays_cold_caches_us": cold_replay_s * 1e6,
        f"{name}_train_breakdown_rest_of_step_us": rest * 1e6,
        f"{name}_train_breakdown_bound_zero_cost_calls": i / rest,
        f"{name}_train_breakdown_bound_calls_as_bare_replays": i / (rest + replay_s),
        f"{name}_train_breakdown_bound_calls_as_cold_bare_replays": i / (rest + cold_replay_s),
        f"{name}_train_breakdown_backward_on_calling_thread_inductor_step_us": i_st * 1e6,
        f"{name}_train_breakdown_backward_on_calling_thread_reduce_overhead_step_us": r_st * 1e6,
        f"{name}_train_breakdown_backward_on_calling_thread_inductor_over_reduce_overhead": i_st / r_st,
    }


def autograd_device_thread_cost(steps: int = 300) -> dict:
    """A trivial backward on npu (autograd's device thread) and on cpu (the calling thread)."""

    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            return g

    out = {}
    for device in ("cpu", "npu"):
        x = torch.ones(1, device=device, requires_grad=True)
        g = torch.ones(1, device=device)

        def step() -> None:
            Identity.apply(x).backward(g)
            x.grad = None

        out[f"trivial_backward_{device}_us"] = _median(step, steps, warmup=20) * 1e6
    return out


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
    parser.add_argument("--blocks", type=int, default=15, help="interleaved timing blocks per model")
    parser.add_argument(
        "--block-steps", type=int, default=10, help="at least this many steps of each variant per block (more, to last ~40 ms)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads (torch.set_num_threads). 1 by default: these models are launch-bound, and "
        "with 2 OpenMP threads on a loaded 2-core machine, kernels run back to back from a replay wait "
        "for spinning OpenMP workers (GPT-2 decode replays seen at 70-140 ms instead of 0.2 ms)",
    )
    parser.add_argument(
        "--breakdown", action="store_true", help="also break a training step down (graph-tree calls vs the rest)"
    )
    parser.add_argument(
        "--compiled-autograd",
        action="store_true",
        help="also time training under reduce-overhead with compiled autograd (the backward traced into one "
        "graph, compiled with reduce-overhead and replayed on the calling thread)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", choices=["linear_ln_gelu", "many_small_ops", "gpt2_decode"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from bench_graphs import ManySmallOps

    def linear_case(train: bool) -> tuple:
        torch.manual_seed(0)
        return LinearLnGelu().npu(), (torch.randn(4, 32, device="npu"),), {}, None

    def small_ops_case(train: bool) -> tuple:
        torch.manual_seed(0)
        return ManySmallOps().npu(), (torch.randn(8, 16, device="npu"),), {}, None

    cases: dict[str, Any] = {"linear_ln_gelu": linear_case, "many_small_ops": small_ops_case}
    gpt2 = _gpt2_case()
    results: dict[str, Any] = {"load_average_1min": os.getloadavg()[0], "threads": torch.get_num_threads()}
    if isinstance(gpt2, str):
        results["gpt2_decode_skipped"] = gpt2
    else:
        cases["gpt2_decode"] = gpt2
    for name, make in cases.items():
        if args.only and name != args.only:
            continue
        results.update(_time_model(name, make, args.blocks, args.block_steps, train=False))
        results.update(
            _time_model(name, make, args.blocks, args.block_steps, train=True, compiled_autograd=args.compiled_autograd)
        )
        if args.breakdown:
            results.update(training_breakdown(name, make))
    if args.breakdown:
        results.update(autograd_device_thread_cost())
    results["load_average_1min_end"] = os.getloadavg()[0]
    results.update(replay_cost_per_launch())
    results.update(memory_after_replays())
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for key, value in results.items():
            print(f"{key:55s} {value:.3f}" if isinstance(value, float) else f"{key:55s} {value}")


if __name__ == "__main__":
    main()
