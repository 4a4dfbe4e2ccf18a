"""The op families load on first use: ``import torch_npu`` imports none of them yet every
``torch.ops.npu`` operator resolves and runs its family's kernels from its first call, however
it is reached (eager, autograd, inference mode, another thread, an exported program loaded in a
fresh process, ``torch_npu.<name>``); the schema catalog that makes this possible, and its C++
include the runtime library defines the schemas from, match the families."""
from __future__ import annotations

import os
import subprocess
import sys

import torch
from fresh_interpreter import REPO_ROOT

from torch_npu import ops
from torch_npu.ops import _catalog, _schema_include

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


def test_schema_include_matches_the_catalog():
    with open(_schema_include.PATH) as f:
        assert f.read() == _schema_include.render(_catalog.SCHEMAS), "regenerate with: python -m torch_npu.ops"
    defined = {name for _, name in torch_npu_C()._npu_predefined_ops()}
    catalogued = {schema.split("(", 1)[0].strip() for items in _catalog.SCHEMAS.values() for schema in items}
    assert defined == catalogued, "rebuild the extension after python -m torch_npu.ops"


def torch_npu_C():
    import torch_npu._C

    return torch_npu._C


def _run_strict(code: str) -> str:
    """Run ``code`` in a fresh interpreter with every warning an error; fail on any stderr."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and not result.stderr.strip(), result.stdout + result.stderr
    return result.stdout


def test_first_call_matches_the_loaded_family_and_cpu_without_warnings():
    out = _run_strict(_NO_FAMILY + """
x = torch.randn(3, 8); w = torch.rand(8) + 0.5
ref = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w)
with torch.inference_mode():
    first = torch.ops.npu.npu_rms_norm(x.npu(), w.npu())[0]
assert "torch_npu.ops.norms" in sys.modules
again = torch.ops.npu.npu_rms_norm(x.npu(), w.npu())[0]
print("RMS", torch.equal(first.cpu(), again.cpu()), torch.allclose(first.cpu(), ref, atol=1e-5))

# autograd on the first call of another family's operator
g = torch.randn(4, 6)
xn = g.npu().requires_grad_()
first = torch.ops.npu.npu_fast_gelu(xn)
first.sum().backward()
xn2 = g.npu().requires_grad_()
again = torch.ops.npu.npu_fast_gelu(xn2)
again.sum().backward()
ref = g.clone().requires_grad_()
(ref * torch.sigmoid(1.702 * ref)).sum().backward()
print("GELU", torch.equal(first.detach().cpu(), again.detach().cpu()), torch.equal(xn.grad.cpu(), xn2.grad.cpu()),
      torch.allclose(xn.grad.cpu(), ref.grad, atol=1e-4), first.grad_fn is not None)
""")
    assert "LOADED []" in out and "RMS True True" in out and "GELU True True True True" in out, out


def test_first_call_from_another_thread():
    out = _run_strict(_NO_FAMILY + """
import threading
x = torch.randn(3, 8); w = torch.rand(8) + 0.5
results = []
t = threading.Thread(target=lambda: results.append(torch.ops.npu.npu_rms_norm(x.npu(), w.npu())[0]))
t.start(); t.join(60)
ref = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w)
print("THREAD", len(results) == 1 and torch.allclose(results[0].cpu(), ref, atol=1e-5))
""")
    assert "THREAD True" in out, out


def test_a_family_that_fails_to_import_raises_its_error_at_first_call(python):
    out = python("""
import sys, torch, torch_npu
sys.modules["torch_npu.ops.norms"] = None  # the import fails with a known message
try:
    torch.ops.npu.npu_rms_norm(torch.randn(2, 4).npu(), torch.ones(4).npu())
except RuntimeError as e:
    print("ERROR", "torch_npu.ops.norms" in str(e), "halted" in str(e))
""")
    assert "ERROR True True" in out, out


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


def test_first_call_in_a_forked_child():
    out = _run_strict(_NO_FAMILY + """
import os
x = torch.randn(3, 8); w = torch.rand(8) + 0.5
ref = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w)
pid = os.fork()
if pid == 0:
    y = torch.ops.npu.npu_rms_norm(x.npu(), w.npu())[0]
    os._exit(0 if torch.allclose(y.cpu(), ref, atol=1e-5) else 3)
_, status = os.waitpid(pid, 0)
print("CHILD", os.waitstatus_to_exitcode(status))
print("PARENT", torch.allclose(torch.ops.npu.npu_rms_norm(x.npu(), w.npu())[0].cpu(), ref, atol=1e-5))
""")
    assert "CHILD 0" in out and "PARENT True" in out, out
