"""CIFAR-style mixed-precision training written for CUDA (synthetic 3x16x16 images).

A small conv net with BatchNorm and a custom autograd function (a linear layer with
``@torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float16)`` and an fp32
normalisation with ``@torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)``), trained with
SGD under ``torch.autocast`` and ``torch.amp.GradScaler``, as in PyTorch's AMP recipe.
Prints what it computed, and the dtypes the custom functions saw, as JSON.
"""
import json

import torch
import torch.nn as nn
import torch.nn.functional as F

seen_dtypes = {}


class CustomLinear(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float16)
    def forward(ctx, x, weight, bias):
        seen_dtypes["linear"] = [str(x.dtype), str(weight.dtype), torch.is_autocast_enabled("cuda")]
        ctx.save_for_backward(x, weight)
        return x @ weight.t() + bias

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        # Autograd casts each gradient to its input's dtype.
        return grad @ weight.to(grad.dtype), grad.t() @ x.to(grad.dtype), grad.sum(0)


class FP32Normalize(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
    def forward(ctx, x):
        seen_dtypes["normalize"] = [str(x.dtype), torch.is_autocast_enabled("cuda")]
        norm = x.norm(dim=1, keepdim=True).clamp_min(1e-6)
        ctx.save_for_backward(x, norm)
        return x / norm

    @staticmethod
    @torch.cuda.amp.custom_bwd
    def backward(ctx, grad):
        x, norm = ctx.saved_tensors
        y = x / norm
        return (grad - y * (grad * y).sum(1, keepdim=True)) / norm


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.weight = nn.Parameter(torch.randn(10, 16 * 4 * 4) * 0.05)
        self.bias = nn.Parameter(torch.zeros(10))

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = FP32Normalize.apply(torch.flatten(x, 1))
        return CustomLinear.apply(x, self.weight, self.bias)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    images = torch.randn(64, 3, 16, 16)
    labels = torch.randint(0, 10, (64,))
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    scaler = torch.amp.GradScaler(device.type)
    losses, scales = [], []
    for epoch in range(2):
        for start in range(0, 64, 16):
            x = images[start:start + 16].to(device)
            y = labels[start:start + 16].to(device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device.type, dtype=torch.float16):
                output = model(x)
                loss = F.cross_entropy(output, y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            losses.append(loss.item())
            scales.append(scaler.get_scale())
    print(json.dumps({
        "losses": losses,
        "scales": scales,
        "seen_dtypes": seen_dtypes,
        "output_dtype": str(output.dtype),
        "parameters": {k: v.detach().float().cpu().flatten().tolist() for k, v in model.state_dict().items()},
        "device": str(next(model.parameters()).device),
    }))


if __name__ == "__main__":
    main()
