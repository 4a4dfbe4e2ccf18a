"""The op families load on first use: ``import torch_npu`` imports none of them yet every
``torch.ops.npu`` operator resolves and runs its family's kernels from its first call, however
it is reached (eager, autograd, inference mode, an exported program loaded in a fresh process,
``torch_npu.<name>``); the schema catalog that makes this possible matches the families."""
from __future__ import annotations

import torch

from torch_npu import ops
from torch_npu.ops import _catalog

_NO_FAMILY = """
import sys, torch, torch_npu
loaded = sorted(m for m in sys.modules if m.startswith("torch_npu.ops.") and m.rpartition(".")[2] in
                __import__("torch_npu.ops", fromlist=["_"]).FAMILIES)
print("LOADED", loaded)
"""


def _rms_norm_reference(x, w, eps=1e-6):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def test_catalog_matches_the_families():
    schemas, exports = ops.build_catalog()
    assert schemas == _catalog.SCHEMAS, "regenerate with: python -m torch_npu.ops"
    assert exports == _catalog.EXPORTS, "regenerate with: python -m torch_npu.ops"
    assert sum(map(len, schemas.values())) >= 100


def test_import_torch_npu_imports_no_family(python):
    out = python(_NO_FAMILY)
    assert "LOADED []" in out, out


def test_first_call_through_torch_ops_loads_only_that_family(python):
    out = python(_NO_FAMILY + """
x = torch.randn(3, 8); w = torch.rand(8) + 0.5
y, rstd = torch.ops.npu.npu_rms_norm(x.npu(), w.npu())
ref = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w)
print("CLOSE", torch.allclose(y.cpu(), ref, atol=1e-5))
print("NORMS", "torch_npu.ops.norms" in sys.modules, "torch_npu.ops.moe" in sys.modules)
print("META", torch._C._dispatch_has_kernel_for_dispatch_key("npu::npu_rms_norm", "Meta"))
""")
    assert "CLOSE True" in out and "NORMS True False" in out and "META True" in out, out


def test_first_call_with_autograd_uses_the_family_backward(python):
    out = python("""
import torch, torch_npu
x = torch.randn(4, 6, requires_grad=True)
xn = x.detach().npu().requires_grad_()
torch.ops.npu.npu_fast_gelu(xn).sum().backward()
torch.ops.npu.npu_fast_gelu(xn.detach().cpu().npu())  # the family is loaded now
ref = x.detach().requires_grad_()
(ref * torch.sigmoid(1.702 * ref)).sum().backward()
print("GRAD", torch.allclose(xn.grad.cpu(), ref.grad, atol=1e-4))
""")
    assert "GRAD True" in out, out


def test_first_call_in_inference_mode(python):
    out = python("""
import torch, torch_npu
x = torch.randn(3, 8); w = torch.rand(8) + 0.5
with torch.inference_mode():
    y = torch.ops.npu.npu_rms_norm(x.npu(), w.npu())[0]
ref = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w)
print("CLOSE", torch.allclose(y.cpu(), ref, atol=1e-5))
""")
    assert "CLOSE True" in out, out


def test_torch_npu_attribute_loads_its_family(python):
    out = python(_NO_FAMILY + """
f = torch_npu.npu_format_cast
print("FAMILY", "torch_npu.ops.format_cast" in sys.modules, f.__module__)
print("DIR", "npu_rms_norm" in dir(torch_npu))
""")
    assert "FAMILY True torch_npu.ops.format_cast" in out and "DIR True" in out, out


def test_exported_program_loads_in_a_process_that_never_used_the_op(python, tmp_path):
    path = tmp_path / "rms.pt2"
    python(f"""
import torch, torch_npu
class M(torch.nn.Module):
    def forward(self, x, w):
        return torch_npu.npu_rms_norm(x, w)[0] * 2
ep = torch.export.export(M(), (torch.randn(3, 8).npu(), torch.ones(8).npu()))
assert any("npu_rms_norm" in str(n.target) for n in ep.graph.nodes), ep.graph
torch.export.save(ep, {str(path)!r})
""")
    out = python(_NO_FAMILY + f"""
ep = torch.export.load({str(path)!r})
x = torch.randn(3, 8); w = torch.rand(8) + 0.5
y = ep.module()(x.npu(), w.npu())
ref = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w) * 2
print("CLOSE", torch.allclose(y.cpu(), ref, atol=1e-5))
""")
    assert "LOADED []" in out and "CLOSE True" in out, out


def test_opcheck_on_a_first_call(python):
    out = python("""
import torch, torch_npu
x = torch.randn(3, 8).npu(); w = (torch.rand(8) + 0.5).npu()
torch.library.opcheck(torch.ops.npu.npu_rms_norm.default, (x, w))
print("OPCHECK ok")
""")
    assert "OPCHECK ok" in out, out
