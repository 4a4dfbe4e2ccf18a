"""torch_npu.npu_geglu and npu_fast_gelu / fast_gelu against float64 references of Ascend's
formulas (forward and backward), diffusers' GEGLU call, argument errors, opcheck and one
fused Inductor kernel."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from npu_ops_compare import DTYPES, assert_close, cpu_leaf, npu_leaf, opcheck

import torch_npu

DTYPE_IDS = [str(d).split(".")[-1] for d in DTYPES]


def geglu_reference(x, dim, approximate, activate_left):
    first, second = x.chunk(2, dim=dim)
    gate, linear = (first, second) if activate_left else (second, first)
    gelu = F.gelu(gate, approximate="tanh" if approximate == 1 else "none")
    return linear * gelu, gelu


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("dim,approximate,activate_left", [(-1, 1, False), (-1, 0, True), (1, 0, False), (0, 1, True)])
def test_npu_geglu_forward_and_backward(dtype, dim, approximate, activate_left):
    x0 = torch.randn(4, 6, 10)
    x, xr = npu_leaf(x0, dtype), cpu_leaf(x0, dtype)
    y, gelu = torch_npu.npu_geglu(x, dim=dim, approximate=approximate, activate_left=activate_left)
    y_ref, gelu_ref = geglu_reference(xr, dim, approximate, activate_left)
    assert y.dtype == gelu.dtype == dtype and y.shape == y_ref.shape
    assert_close(y, y_ref, dtype)
    assert_close(gelu, gelu_ref, dtype)
    assert not gelu.requires_grad  # Ascend: only the first output is differentiable
    seed = torch.randn(y_ref.shape)
    y.backward(seed.to(dtype).npu())
    y_ref.backward(seed.to(dtype).double())
    assert_close(x.grad, xr.grad, dtype, scale=2)


def test_diffusers_geglu_call_equals_the_plain_formula():
    # diffusers.models.activations.GEGLU.forward on npu: proj, then npu_geglu(h, dim=-1, approximate=1)[0];
    # elsewhere: h, gate = h.chunk(2, -1); h * gelu(gate). Same formula with the tanh GELU.
    torch.manual_seed(0)
    proj = torch.nn.Linear(16, 2 * 24)
    x = torch.randn(2, 5, 16)
    hidden = proj(x)
    plain_h, plain_gate = hidden.double().chunk(2, dim=-1)
    expected = plain_h * F.gelu(plain_gate, approximate="tanh")
    npu_proj = proj.to("npu")
    out = torch_npu.npu_geglu(npu_proj(x.npu()), dim=-1, approximate=1)[0]
    assert out.device.type == "npu" and out.shape == (2, 5, 24)
    assert_close(out, expected, torch.float32)
    # and the erf form (approximate=0) is diffusers' own F.gelu
    out0 = torch_npu.npu_geglu(npu_proj(x.npu()), dim=-1, approximate=0)[0]
    assert_close(out0, plain_h * F.gelu(plain_gate), torch.float32)


def fast_gelu_reference(x):
    # Ascend's formula, literally.
    return x / (1 + torch.exp(-1.702 * x.abs())) * torch.exp(0.851 * (x - x.abs()))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", ["npu_fast_gelu", "fast_gelu"])
def test_fast_gelu_forward_and_backward(dtype, name):
    x0 = torch.randn(64, 33) * 4
    x, xr = npu_leaf(x0, dtype), cpu_leaf(x0, dtype)
    y = getattr(torch_npu, name)(x)
    y_ref = fast_gelu_reference(xr)
    assert y.dtype == dtype
    assert_close(y, y_ref, dtype)
    seed = torch.randn(64, 33)
    y.backward(seed.to(dtype).npu())
    y_ref.backward(seed.to(dtype).double())
    assert_close(x.grad, xr.grad, dtype, scale=2)


def test_argument_errors_name_the_argument():
    x = torch.randn(4, 5, device="npu")
    with pytest.raises(ValueError, match="dim=1 .*must be even"):
        torch_npu.npu_geglu(x, dim=1)
    with pytest.raises(ValueError, match="approximate=2"):
        torch_npu.npu_geglu(torch.randn(4, 6, device="npu"), approximate=2)
    with pytest.raises(IndexError, match="dim=3"):
        torch_npu.npu_geglu(torch.randn(4, 6, device="npu"), dim=3)
    with pytest.raises(TypeError, match="self has dtype int64"):
        torch_npu.npu_fast_gelu(torch.ones(3, dtype=torch.long, device="npu"))


def test_opcheck():
    x = torch.randn(3, 4, 8, device="npu", requires_grad=True)
    opcheck(torch.ops.npu.npu_geglu.default, (x, -1, 0, True))
    opcheck(torch.ops.npu.npu_geglu_grad.default, (torch.randn(3, 4, 4, device="npu"), x.detach(), torch.randn(3, 4, 4, device="npu"), -1, 1, False))
    opcheck(torch.ops.npu.npu_fast_gelu.default, (x,))
    opcheck(torch.ops.npu.fast_gelu.default, (x,))
    opcheck(torch.ops.npu.npu_fast_gelu_backward.default, (x.detach(), x.detach()))


def test_compiled_geglu_is_one_fused_kernel_equal_to_eager(fresh_compiled_state):
    from torch._inductor.utils import run_and_get_code

    x = torch.randn(32, 64, device="npu")
    fn = torch.compile(lambda t: torch_npu.npu_geglu(t)[0] + torch_npu.npu_fast_gelu(t[:, :32]), backend="inductor", fullgraph=True)
    out, code = run_and_get_code(fn, x)
    code = "\n".join(code)
    assert "torch.ops.npu" not in code
    assert code.count("npu_launch_host_kernel(") == 1
    eager = torch_npu.npu_geglu(x)[0] + torch_npu.npu_fast_gelu(x[:, :32])
    assert_close(out, eager, torch.float32)
