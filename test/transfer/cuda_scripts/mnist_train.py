"""MNIST-style training written for CUDA, in the style of pytorch/examples (synthetic data).

A conv net trained with Adadelta and StepLR from a DataLoader with pinned memory, NVTX
ranges around the phases of each step (seen by a profiler trace), a checkpoint saved after
training and resumed the ways checkpoint loaders write it (``map_location="cuda:<gpu>"``,
``map_location=lambda storage, loc: storage.cuda(gpu)``), then one more epoch. Prints what
it computed as JSON on its last line. Falls back to cpu where CUDA is unavailable.
"""
import argparse
import contextlib
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.fc1 = nn.Linear(2304, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def nvtx_range(name):
    return torch.cuda.nvtx.range(name) if torch.cuda.is_available() else contextlib.nullcontext()


def train(model, device, loader, optimizer, losses):
    model.train()
    for step, (data, target) in enumerate(loader):
        if torch.cuda.is_available():
            torch.cuda.nvtx.range_push(f"step {step}")
        data, target = data.to(device, non_blocking=True), target.to(device, non_blocking=True)
        optimizer.zero_grad()
        with nvtx_range("forward"):
            output = model(data)
            loss = F.nll_loss(output, target)
        with nvtx_range("backward"):
            loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if torch.cuda.is_available():
            torch.cuda.nvtx.range_pop()


def test(model, device, loader):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            correct += output.argmax(dim=1, keepdim=True).eq(target.view_as(output.argmax(dim=1, keepdim=True))).sum().item()
    return test_loss / len(loader.dataset), correct


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out-dir", default=".")
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if use_cuda else "cpu")
    gpu = 0 if use_cuda else None

    images = torch.randn(128, 1, 28, 28)
    labels = torch.randint(0, 10, (128,))
    train_kwargs = {"batch_size": 32, "shuffle": True}
    if use_cuda:
        train_kwargs.update({"pin_memory": True})
    train_loader = DataLoader(TensorDataset(images, labels), **train_kwargs)
    test_loader = DataLoader(TensorDataset(images[:64], labels[:64]), batch_size=64)

    model = Net().to(device)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    activities = [torch.profiler.ProfilerActivity.CPU]
    trace = os.path.join(args.out_dir, "trace.json")
    with torch.profiler.profile(activities=activities) as prof:
        for epoch in range(1, args.epochs + 1):
            train(model, device, train_loader, optimizer, losses)
            scheduler.step()
    prof.export_chrome_trace(trace)
    evaluation = test(model, device, test_loader)

    checkpoint_path = os.path.join(args.out_dir, "mnist_cnn.pt")
    torch.save({"epoch": args.epochs, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict()}, checkpoint_path)

    # Resume as the ImageNet example does, then as older loaders do.
    if gpu is None:
        checkpoint = torch.load(checkpoint_path)
    else:
        checkpoint = torch.load(checkpoint_path, map_location=f"cuda:{gpu}")
    resumed = Net().to(device)
    resumed.load_state_dict(checkpoint["model"])
    resumed_optimizer = torch.optim.Adadelta(resumed.parameters(), lr=args.lr)
    resumed_optimizer.load_state_dict(checkpoint["optimizer"])
    resumed_scheduler = StepLR(resumed_optimizer, step_size=1, gamma=0.7)
    resumed_scheduler.load_state_dict(checkpoint["scheduler"])
    legacy = torch.load(checkpoint_path, map_location=(lambda storage, loc: storage.cuda(gpu)) if use_cuda else "cpu")
    loaded_devices = sorted({str(t.device) for t in list(checkpoint["model"].values()) + list(legacy["model"].values())})
    resumed_losses = []
    train(resumed, device, train_loader, resumed_optimizer, resumed_losses)

    print(json.dumps({
        "losses": losses,
        "evaluation": evaluation,
        "resumed_losses": resumed_losses,
        "loaded_devices": loaded_devices,
        "legacy_equal": all(torch.equal(legacy["model"][k].cpu(), v.cpu()) for k, v in checkpoint["model"].items()),
        "parameters": {k: v.detach().cpu().flatten().tolist() for k, v in resumed.state_dict().items()},
        "trace": trace,
        "device": str(next(model.parameters()).device),
    }))


if __name__ == "__main__":
    main()
