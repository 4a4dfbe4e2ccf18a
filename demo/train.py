"""Trains a small classifier on the npu device and checks it against the same run on CPU.

The data is a synthetic 3-class spiral. The model, its initial weights, the data and the
batch order are identical on both devices, so the npu run should reproduce the CPU run:
the script prints the loss curve, the held-out accuracy on both devices, how far the
final weights drifted apart, and the training speed.

    python demo/train.py [--steps 400] [--batch 128] [--device npu]
"""
from __future__ import annotations

import argparse
import copy
import math
import time

import torch
import torch.nn.functional as F
from torch import nn

import torch_npu  # noqa: F401  (registers the npu device)

CLASSES = 3


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


def train(model: nn.Module, device: torch.device, data, batch_order: list[torch.Tensor]) -> dict:
    """Runs the whole training on ``device``; returns losses, accuracy and timing."""
    x_train, y_train, x_test, y_test = (t.to(device) for t in data)
    model = model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=len(batch_order))
    losses = []
    if device.type == "npu":
        torch.npu.synchronize()
    start = time.perf_counter()
    for idx in batch_order:
        idx = idx.to(device)
        logits = model(x_train[idx])
        loss = F.cross_entropy(logits, y_train[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.detach())
    if device.type == "npu":
        torch.npu.synchronize()
    elapsed = time.perf_counter() - start
    with torch.no_grad():
        accuracy = (model(x_test).argmax(dim=1) == y_test).float().mean().item()
    return {
        "losses": torch.stack(losses).cpu(),
        "accuracy": accuracy,
        "steps_per_s": len(batch_order) / elapsed,
        "model": model,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--device", default="npu", help="npu device to train on, e.g. npu or npu:1")
    args = parser.parse_args()

    device = torch.device(args.device)
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
          f"{sum(p.numel() for p in initial.parameters())} parameters, {args.steps} steps of {args.batch}")

    # Untimed warm-up on both devices (thread pools, allocator caches, lazy init) so the
    # timed runs compare steady-state speed.
    for warm_device in (device, torch.device("cpu")):
        train(copy.deepcopy(initial), warm_device, data, batch_order[:20])

    npu_run = train(copy.deepcopy(initial), device, data, batch_order)
    cpu_run = train(copy.deepcopy(initial), torch.device("cpu"), data, batch_order)

    losses = npu_run["losses"]
    marks = sorted({0, len(losses) // 4, len(losses) // 2, 3 * len(losses) // 4, len(losses) - 1})
    print("loss curve (npu):  " + "  ".join(f"step {i}: {losses[i]:.4f}" for i in marks))
    window = max(1, len(losses) // 10)
    print(f"mean loss, first {window} steps {losses[:window].mean():.4f} -> last {window} steps {losses[-window:].mean():.4f}")
    loss_gap = (npu_run["losses"] - cpu_run["losses"]).abs().max().item()
    weight_gap = max(
        (p_npu.detach().cpu() - p_cpu.detach()).abs().max().item()
        for p_npu, p_cpu in zip(npu_run["model"].parameters(), cpu_run["model"].parameters())
    )
    print(f"test accuracy: npu {npu_run['accuracy']:.3f}   cpu {cpu_run['accuracy']:.3f}")
    print(f"npu vs cpu: max loss difference {loss_gap:.2e}, max weight difference {weight_gap:.2e}")
    print(f"speed: npu {npu_run['steps_per_s']:.0f} steps/s   cpu {cpu_run['steps_per_s']:.0f} steps/s "
          f"(npu/cpu {npu_run['steps_per_s'] / cpu_run['steps_per_s']:.2f})")
    print(f"npu memory: peak allocated {torch.npu.max_memory_allocated(device) / 2**20:.2f} MiB")
    if not math.isclose(npu_run["accuracy"], cpu_run["accuracy"], abs_tol=0.02):
        raise SystemExit("npu and cpu runs disagree")


if __name__ == "__main__":
    main()
