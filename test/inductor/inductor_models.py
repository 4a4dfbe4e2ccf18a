"""Small models and the npu-vs-cpu comparison the Inductor tests share.

Every check runs the model compiled on npu and eagerly on cpu from the same weights and
inputs; npu eager equals cpu eager by construction of the runtime, so cpu eager is the
reference.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

NPU = torch.device("npu")
CPU = torch.device("cpu")


class MLP(nn.Module):
    def __init__(self, d_in: int = 32, d_hidden: int = 64, d_out: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.fc1(x))
        x = torch.tanh(self.fc2(x)) * torch.sigmoid(x)
        return self.fc3(x)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.ff1 = nn.Linear(dim, 4 * dim)
        self.ff2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))


# The models every backend's forward+backward test runs, each with a cpu input maker:
# ``@pytest.mark.parametrize("make_model, make_input", MODEL_CASES)``.
MODEL_CASES = [
    pytest.param(MLP, lambda: torch.randn(16, 32), id="mlp"),
    pytest.param(SmallCNN, lambda: torch.randn(4, 3, 16, 16), id="cnn"),
    pytest.param(TransformerBlock, lambda: torch.randn(2, 8, 32), id="transformer"),
]


def mlp_with_adam_on_both() -> tuple[nn.Module, nn.Module, torch.optim.Optimizer, torch.optim.Optimizer]:
    """An MLP with the same weights on cpu and npu, each with its own Adam (lr 1e-2)."""
    torch.manual_seed(0)
    cpu_model = MLP()
    npu_model = copy.deepcopy(cpu_model).to(NPU)
    cpu_opt = torch.optim.Adam(cpu_model.parameters(), lr=1e-2)
    npu_opt = torch.optim.Adam(npu_model.parameters(), lr=1e-2)
    return cpu_model, npu_model, cpu_opt, npu_opt


def on_both(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    """The same weights on cpu and on npu."""
    torch.manual_seed(0)
    cpu_model = model
    npu_model = copy.deepcopy(model).to(NPU)
    return cpu_model, npu_model


def assert_close_to_cpu(npu_value, cpu_value, *, atol: float = 1e-4, rtol: float = 1e-4) -> None:
    if isinstance(npu_value, (tuple, list)):
        assert len(npu_value) == len(cpu_value)
        for a, b in zip(npu_value, cpu_value):
            assert_close_to_cpu(a, b, atol=atol, rtol=rtol)
        return
    assert npu_value.device.type == "npu", npu_value.device
    torch.testing.assert_close(npu_value.cpu(), cpu_value, atol=atol, rtol=rtol)


def forward_backward(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Output and parameter gradients of ``model(x).square().mean()``."""
    model.zero_grad(set_to_none=True)
    out = model(x)
    out.square().mean().backward()
    return out.detach(), [p.grad for p in model.parameters()]


def assert_forward_backward_matches_cpu(
    make_model, make_input, compile_npu, *, grad_atol: float = 1e-4, grad_rtol: float = 1e-4
) -> None:
    """A ``MODEL_CASES`` case compiled on npu by ``compile_npu`` against cpu eager on the
    same weights and input: output, parameter gradients and buffers."""
    torch.manual_seed(0)
    cpu_model = make_model()
    npu_model = copy.deepcopy(cpu_model).to(NPU)
    x = make_input()

    out_cpu, grads_cpu = forward_backward(cpu_model, x)
    out_npu, grads_npu = forward_backward(compile_npu(npu_model), x.to(NPU))

    assert_close_to_cpu(out_npu, out_cpu)
    assert_close_to_cpu(grads_npu, grads_cpu, atol=grad_atol, rtol=grad_rtol)
    # BatchNorm's running statistics are updated by the compiled graph as well.
    assert_close_to_cpu(list(npu_model.buffers()), list(cpu_model.buffers()))
