"""Trains one small model on the npu device through each of its execution paths and checks
every run against the same training on CPU.

The paths are the ones a user of torch_npu has: npu eager; ``torch.compile`` with Inductor
generating npu code (``npu_backend="default"``: C++, and ``"mlir"``: MLIR kernels); and
``backend="npugraphs"``, which records the compiled step as NPU graphs once and replays
them, each step opened with ``torch_npu.npu.mark_step_begin()``. The data (a synthetic
3-class spiral), the initial weights and the batch order are the same for every run, so
each path must reproduce the CPU run. The table gives, per path, the steady-state step
speed against npu eager, the first-step (compile) time, and how far losses and final
weights are from CPU; graph replay and MLIR kernel counts show nothing fell back silently.

    python demo/train.py [--steps 200] [--batch 128] [--device npu]
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import time
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

import torch_npu

CLASSES = 3
WARMUP_STEPS = 3  # compile (and, for npugraphs, warm-up and record) happen here
# The compiled paths fuse and reorder float arithmetic; after a few hundred Adam steps
# their weights stay within this of CPU's.
AGREEMENT = 1e-3


def make_spiral(points_per_class: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Interleaved 2-D spirals, one arm per class, with a little noise."""
    xs, ys = [], []
    for label in range(CLASSES):
        radius = torch.linspace(0.05, 1.0, points_per_class)
        angle = torch.linspace(label * 4.0, (label + 1) * 4.0, points_per_class)
        angle = angle + torch.randn(points_per_class, generator=generator) * 0.2
        xs.append(torch.stack([radius * torch.sin(angle), radius * torch.cos(angle)], dim=1))
        ys.append(torch.full((points_per_class,), label, dtype=torch.long))
    return torch.cat(xs), torch.cat(ys)


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(2, 64),
        nn.ReLU(),
        nn.Linear(64, 64),
        nn.LayerNorm(64),
        nn.GELU(),
        nn.Linear(64, CLASSES),
    )


def _synchronize(device: torch.device) -> None:
    if device.type == "npu":
        torch.npu.synchronize(device)


def train(model: nn.Module, device: torch.device, data, batch_order: list[torch.Tensor],
          compile_model: Callable[[nn.Module], Callable] | None = None) -> dict:
    """Runs the whole training on ``device``; returns losses, accuracy and timing."""
    x_train, y_train, x_test, y_test = (t.to(device) for t in data)
    model = model.to(device)
    step_model = compile_model(model) if compile_model is not None else model
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=len(batch_order))
    losses = []
    first_steps = 0.0
    start = time.perf_counter()
    for step, idx in enumerate(batch_order):
        if step == WARMUP_STEPS:
            _synchronize(device)
            first_steps = time.perf_counter() - start
            start = time.perf_counter()
        torch_npu.npu.mark_step_begin()
        idx = idx.to(device)
        logits = step_model(x_train[idx])
        loss = F.cross_entropy(logits, y_train[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.detach().clone())
    _synchronize(device)
    elapsed = time.perf_counter() - start
    with torch.no_grad():
        accuracy = (model(x_test).argmax(dim=1) == y_test).float().mean().item()
    return {
        "losses": torch.stack(losses).cpu(),
        "accuracy": accuracy,
        "steps_per_s": (len(batch_order) - WARMUP_STEPS) / elapsed,
        "first_steps_s": first_steps,
        "model": model,
    }


def _inductor(npu_backend: str) -> Callable[[nn.Module], Callable]:
    return lambda m: torch.compile(m, backend="inductor", options={"npu_backend": npu_backend})


class _GraphReplays:
    """Counts NPU graphs recorded and replayed, and steps that ran eagerly instead."""

    def __enter__(self) -> "_GraphReplays":
        from torch_npu.compiler import graph_trees

        graph_trees.reset()
        self.stats: dict = {}
        return self

    def __exit__(self, *exc) -> None:
        from torch_npu.compiler import graph_trees

        manager = graph_trees.get_manager(torch.npu.current_device(), create_if_none_exists=False)
        self.stats = dict(manager.stats) if manager is not None else {}

    def note(self) -> str:
        s = self.stats
        return f"graphs: {s.get('records', 0)} recorded, {s.get('replays', 0)} replays, {s.get('eager_runs', 0)} eager"

    def ok(self) -> bool:
        return self.stats.get("records", 0) > 0 and self.stats.get("replays", 0) > 0 and \
            self.stats.get("eager_runs", 0) == 0


class _MlirKernels:
    """Counts kernels emitted as MLIR and kernels handed back to the C++ path."""

    def __enter__(self) -> "_MlirKernels":
        from torch_npu.compiler.inductor import mlir

        mlir.reset_fallback_stats()
        self.stats: dict = {}
        return self

    def __exit__(self, *exc) -> None:
        from torch_npu.compiler.inductor import mlir

        self.stats = mlir.fallback_stats()

    def note(self) -> str:
        return f"kernels: {self.stats.get('mlir_kernels', 0)} MLIR, {self.stats.get('fallbacks', 0)} C++ fallbacks"

    def ok(self) -> bool:
        return self.stats.get("mlir_kernels", 0) > 0 and self.stats.get("fallbacks", 0) == 0


class _NoCheck:
    def __enter__(self) -> "_NoCheck":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def note(self) -> str:
        return ""

    def ok(self) -> bool:
        return True


def _paths() -> list[tuple[str, Callable | None, type, str | None]]:
    """(name, how the model is compiled, what is checked, why the path cannot run here)."""
    no_mlir = None if importlib.util.find_spec("torch_mlir") else \
        "torch-mlir is not installed (bash scripts/setup_env.sh --test installs it)"
    return [
        ("npu eager", None, _NoCheck, None),
        ("inductor default", _inductor("default"), _NoCheck, None),
        ("inductor mlir", _inductor("mlir"), _MlirKernels, no_mlir),
        ("npugraphs", lambda m: torch.compile(m, backend="npugraphs"), _GraphReplays, None),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--device", default="npu", help="npu device to train on, e.g. npu or npu:1")
    args = parser.parse_args()
    if args.steps <= WARMUP_STEPS:
        parser.error(f"--steps must be more than {WARMUP_STEPS} (the first steps compile)")

    device = torch.device(args.device)
    if device.index is not None:
        torch.npu.set_device(device)
    gen = torch.Generator().manual_seed(0)
    x, y = make_spiral(1000, gen)
    perm = torch.randperm(len(x), generator=gen)
    split = int(0.8 * len(x))
    data = (x[perm[:split]], y[perm[:split]], x[perm[split:]], y[perm[split:]])
    batch_order = [torch.randint(0, split, (args.batch,), generator=gen) for _ in range(args.steps)]

    torch.manual_seed(0)
    initial = make_model()
    props = torch.npu.get_device_properties(device)
    print(f"device {device} ({props.name}, {props.total_memory / 2**30:.0f} GiB), "
          f"{sum(p.numel() for p in initial.parameters())} parameters, {args.steps} steps of {args.batch}, "
          f"Adam + cosine schedule")

    cpu_run = train(copy.deepcopy(initial), torch.device("cpu"), data, batch_order)
    rows, failures = [], []
    eager_speed = None
    for name, compile_model, check_type, unavailable in _paths():
        if unavailable:
            rows.append((name, "-", "-", "-", "-", "-", f"not run: {unavailable}"))
            continue
        with check_type() as check:
            run = train(copy.deepcopy(initial), device, data, batch_order, compile_model)
        if eager_speed is None:
            eager_speed = run["steps_per_s"]
        loss_gap = (run["losses"] - cpu_run["losses"]).abs().max().item()
        weight_gap = max((p.detach().cpu() - q.detach()).abs().max().item()
                         for p, q in zip(run["model"].parameters(), cpu_run["model"].parameters()))
        agrees = loss_gap <= AGREEMENT and weight_gap <= AGREEMENT
        if not agrees:
            failures.append(f"{name}: differs from cpu (loss {loss_gap:.1e}, weights {weight_gap:.1e})")
        if not check.ok():
            failures.append(f"{name}: {check.note()}")
        rows.append((name, f"{run['steps_per_s']:.0f}", f"{run['steps_per_s'] / eager_speed:.2f}x",
                     f"{run['first_steps_s']:.1f}", f"{loss_gap:.1e}", f"{weight_gap:.1e}",
                     f"acc {run['accuracy']:.3f}" + (f"; {check.note()}" if check.note() else "")))

    header = ("path", "steps/s", "vs eager", f"first {WARMUP_STEPS} steps s", "loss vs cpu", "weights vs cpu",
              "notes")
    rows.insert(0, header)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    print()
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
        if i == 0:
            print("  ".join("-" * w for w in widths) + "  " + "-" * 5)
    print(f"\ncpu eager: {cpu_run['steps_per_s']:.0f} steps/s, test accuracy {cpu_run['accuracy']:.3f}; "
          f"differences are the largest over every step's loss and every final weight")
    if failures:
        raise SystemExit("\n".join(failures))


if __name__ == "__main__":
    main()
