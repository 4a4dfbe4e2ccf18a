"""The models the benchmark scripts time, defined once.

``bench_inductor.py`` and ``bench_mlir.py`` time the same pointwise-heavy model and
transformer block; keeping one definition here means their figures always measure the
same modules (same shapes, same ops) and stay comparable. ``bench_inductor.py``'s
first-compile children import this module too, so they build exactly what the
in-process timing builds. The tests keep their own models in ``test/inductor``.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class PointwiseHeavy(nn.Module):
    # Twelve elementwise ops over a 1M-element tensor: eager makes twelve passes and
    # allocations, Inductor fuses them into one kernel.
    def forward(self, x):
        y = torch.sin(x) * 1.5 + 0.25
        y = torch.tanh(y) * torch.sigmoid(x)
        y = torch.exp(-y.abs()) + y * y
        y = torch.where(y > 0.5, y - 0.5, y * 0.1)
        return torch.sqrt(y.abs() + 1e-3) * torch.cos(x)


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x * 0.5, dim=-1)


class LayerNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        return F.gelu(self.ln(x))


class MLP(nn.Module):
    def __init__(self, dim=512):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(x)))


class TransformerBlock(nn.Module):
    def __init__(self, dim=256, heads=8):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.ff1 = nn.Linear(dim, 4 * dim)
        self.ff2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))


def make_inductor_bench_case(name):
    """The model and cpu input ``bench_inductor.py`` times as ``name`` ("pointwise" or
    "transformer"), with weights and input from seed 0."""
    torch.manual_seed(0)
    if name == "pointwise":
        return PointwiseHeavy(), torch.randn(1 << 20)
    return TransformerBlock().eval(), torch.randn(4, 128, 256)
