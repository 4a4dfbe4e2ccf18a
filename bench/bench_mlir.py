"""npu_backend="mlir" vs "default": steady-state time per call, side by side.

For each model, both backends compile the same module (same weights, same input) on
npu; then rounds alternate one timing of each (median of `--calls` calls), and the
reported ratio is the median over rounds of mlir/default, so load on the machine hits
both alike. Also reports the mlir backend's fallback counter per model (target 0).

Usage: ``python bench/bench_mlir.py [--rounds N] [--calls N] [--threads N] [--json PATH]``.
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

import torch
from bench_models import MLP, LayerNorm, PointwiseHeavy, Softmax, TransformerBlock

import torch_npu  # noqa: F401  (registers the npu device)
from torch_npu.compiler.inductor import mlir as mlir_backend

OPTIONS = {
    "default": {"npu_backend": "default"},
    "mlir": {"npu_backend": "mlir"},
}


def cases():
    return {
        "pointwise_heavy": (PointwiseHeavy(), (1 << 20,)),
        "softmax": (Softmax(), (512, 1024)),
        "layernorm_gelu": (LayerNorm(1024), (512, 1024)),
        "mlp": (MLP(), (256, 512)),
        "transformer_block": (TransformerBlock(), (8, 128, 256)),
    }


def time_calls(fn, x, calls):
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(x)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def bench_model(name, model, shape, rounds, calls):
    torch.manual_seed(0)
    x = torch.randn(*shape).to("npu")
    compiled, fallbacks = {}, None
    with torch.no_grad():
        for backend, options in OPTIONS.items():
            mlir_backend.reset_fallback_stats()
            fn = torch.compile(copy.deepcopy(model).to("npu"), options=options)
            fn(x)
            fn(x)
            compiled[backend] = fn
            if backend == "mlir":
                fallbacks = mlir_backend.fallback_stats()
        torch.testing.assert_close(compiled["mlir"](x).cpu(), compiled["default"](x).cpu(), atol=1e-3, rtol=1e-3)
        ratios, times = [], {"default": [], "mlir": []}
        for _ in range(rounds):
            for backend in ("default", "mlir"):
                times[backend].append(time_calls(compiled[backend], x, calls))
            ratios.append(times["mlir"][-1] / times["default"][-1])
    return {
        "model": name,
        "default_us": statistics.median(times["default"]) * 1e6,
        "mlir_us": statistics.median(times["mlir"]) * 1e6,
        "mlir_over_default": statistics.median(ratios),
        "fallbacks": fallbacks["fallbacks"],
        "fallback_reasons": fallbacks["reasons"],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads for both backends")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    results = []
    for name, (model, shape) in cases().items():
        if args.only and name not in args.only:
            continue
        r = bench_model(name, model, shape, args.rounds, args.calls)
        results.append(r)
        print(
            f"{name:18s} default {r['default_us']:9.0f} us   mlir {r['mlir_us']:9.0f} us   "
            f"mlir/default {r['mlir_over_default']:.2f}   fallbacks {r['fallbacks']}",
            flush=True,
        )
    print(f"threads: {torch.get_num_threads()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": torch.get_num_threads(), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
