"""torch_npu.jit.optimize: the fast-GELU pass rewrites aten::gelu of scripted models, submodules
included, into npu_fast_gelu, whose numbers are x * sigmoid(1.702 x) (float64 reference)."""
from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401
import torch_npu.jit
from torch_npu.jit.fusion_pass import fast_gelu
from torch_npu.jit.fusion_pass.fast_gelu import fast_gelu_pass

# A stand-in with fast GELU's documented formula, in a namespace of this test's own (the
# npu namespace belongs to the operator registry): the subject here is the graph rewrite.
STAND_IN = "torch_npu_jit_test::fast_gelu"
_lib = torch.library.Library("torch_npu_jit_test", "DEF")
_lib.define("fast_gelu(Tensor self) -> Tensor")
_lib.impl("fast_gelu", lambda x: x * torch.sigmoid(1.702 * x), "CompositeExplicitAutograd")


@pytest.fixture(autouse=True)
def rewrite_target(monkeypatch):
    """The real npu_fast_gelu when this build registers it, else the stand-in."""
    if not hasattr(torch.ops.npu, "npu_fast_gelu"):
        monkeypatch.setattr(fast_gelu, "FAST_GELU_OP", STAND_IN)
    return fast_gelu.FAST_GELU_OP


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, x):
        return torch.nn.functional.gelu(self.proj(x))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = torch.nn.Linear(6, 2)

    def forward(self, x):
        return self.head(torch.nn.functional.gelu(self.block(x), approximate="tanh"))


def _count(graph_owner, kind):
    return sum(1 for m in graph_owner.modules() for n in m.graph.nodes() if n.kind() == kind)


def test_optimize_rewrites_every_gelu_and_computes_fast_gelu(rewrite_target):
    torch.manual_seed(0)
    eager = Net().npu()
    scripted = torch.jit.script(eager)
    assert _count(scripted, "aten::gelu") == 2
    assert torch_npu.jit.optimize(scripted) is scripted
    assert _count(scripted, "aten::gelu") == 0 and _count(scripted, rewrite_target) == 2
    x = torch.randn(5, 6)
    out = scripted(x.npu())

    def fast_gelu(t):
        return t * torch.sigmoid(1.702 * t)

    d = {k: v.detach().cpu().double() for k, v in eager.state_dict().items()}
    h = fast_gelu(x.double() @ d["block.proj.weight"].T + d["block.proj.bias"])
    expected = fast_gelu(h) @ d["head.weight"].T + d["head.bias"]
    torch.testing.assert_close(out.detach().cpu().double(), expected, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(out.detach().cpu(), eager(x.npu()).detach().cpu(), atol=1e-4)  # really rewritten


def test_fast_gelu_pass_on_a_traced_model_and_bad_input(rewrite_target, monkeypatch):
    traced = torch.jit.trace(Block().npu(), torch.randn(2, 6, device="npu"))
    fast_gelu_pass(traced)
    assert _count(traced, rewrite_target) == 1
    with pytest.raises(TypeError, match="TorchScript"):
        torch_npu.jit.optimize(torch.nn.Linear(2, 2))


def test_missing_target_operator_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(fast_gelu, "FAST_GELU_OP", "torch_npu_jit_test::no_such_op")
    with pytest.raises(RuntimeError, match="no_such_op"):
        fast_gelu_pass(torch.jit.script(Block()))
