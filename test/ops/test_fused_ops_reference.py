"""Each fused npu_* operator against a plain-PyTorch float64 cpu reference written from the
Ascend documentation's formula: every mode, float32/float16/bfloat16, forward and backward."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from fused_ops_compare import DTYPES, assert_close, cpu_leaf, npu_leaf

import torch_npu

pytestmark = pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])


def backward_both(npu_out, cpu_out, seed_grad):
    npu_out.backward(seed_grad.to(npu_out.dtype).to("npu"))
    cpu_out.backward(seed_grad.to(npu_out.dtype).double())


# --- RMS norm -------------------------------------------------------------------------------

def rms_norm_reference(x, gamma, eps):
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    rstd = 1.0 / torch.sqrt((x * x).mean(dim=dims, keepdim=True) + eps)
    return x * rstd * gamma, rstd


@pytest.mark.parametrize("shape,gamma_dims", [((4, 7, 64), 1), ((3, 5, 16), 2), ((6, 32), 2)])
def test_rms_norm(dtype, shape, gamma_dims):
    x0, g0 = torch.randn(shape), torch.rand(shape[-gamma_dims:]) + 0.5
    x, g = npu_leaf(x0, dtype), npu_leaf(g0, dtype)
    y, rstd = torch_npu.npu_rms_norm(x, g, epsilon=1e-5)
    xr, gr = cpu_leaf(x0, dtype), cpu_leaf(g0, dtype)
    y_ref, rstd_ref = rms_norm_reference(xr, gr, 1e-5)
    assert y.dtype == dtype and rstd.dtype == torch.float32
    assert rstd.shape == rstd_ref.shape
    assert_close(y, y_ref, dtype)
    assert_close(rstd, rstd_ref, torch.float32, scale=10)
    backward_both(y, y_ref, torch.randn(shape))
    assert_close(x.grad, xr.grad, dtype, scale=2)
    # gamma's gradient sums over many rows: compare relative to its size.
    assert_close(g.grad, gr.grad, dtype, scale=4)


def test_rms_norm_float32_gamma_with_low_precision_input(dtype):
    x0, g0 = torch.randn(8, 32), torch.rand(32) + 0.5
    y, _ = torch_npu.npu_rms_norm(x0.to(dtype).npu(), g0.npu())
    y_ref, _ = rms_norm_reference(x0.to(dtype).double(), g0.double(), 1e-6)
    assert y.dtype == dtype
    assert_close(y, y_ref, dtype)


def test_add_rms_norm(dtype):
    a0, b0, g0 = torch.randn(4, 6, 32), torch.randn(4, 6, 32), torch.rand(32) + 0.5
    y, rstd, x = torch_npu.npu_add_rms_norm(a0.to(dtype).npu(), b0.to(dtype).npu(), g0.to(dtype).npu(), 1e-6)
    total = a0.to(dtype).double() + b0.to(dtype).double()
    y_ref, rstd_ref = rms_norm_reference(total, g0.to(dtype).double(), 1e-6)
    assert (y.dtype, rstd.dtype, x.dtype) == (dtype, torch.float32, dtype)
    assert_close(x, total, dtype)
    assert_close(y, y_ref, dtype)
    assert_close(rstd, rstd_ref, torch.float32, scale=10)


# --- rotary embedding -------------------------------------------------------------------------

def rotate_reference(x, mode):
    if mode == "half":
        x1, x2 = torch.chunk(x, 2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    x1, x2 = x[..., ::2], x[..., 1::2]
    # rearrange(stack((-x2, x1), -1), "... d two -> ... (d two)")
    return torch.stack((-x2, x1), dim=-1).reshape(x.shape)


ROTARY_SHAPES = [
    ((2, 3, 5, 16), (1, 3, 1, 16)),  # BSND with cos/sin 1S1D
    ((2, 4, 5, 8), (2, 1, 5, 8)),  # BNSD with B1SD
    ((6, 2, 3, 16), (6, 2, 3, 16)),  # same shape
    ((2, 5, 16), (2, 1, 16)),  # 3-dimensional
]


@pytest.mark.parametrize("mode", ["half", "interleave"])
@pytest.mark.parametrize("x_shape,r_shape", ROTARY_SHAPES)
def test_rotary_mul(dtype, mode, x_shape, r_shape):
    x0 = torch.randn(x_shape)
    c0, s0 = torch.rand(r_shape) * 2 - 1, torch.rand(r_shape) * 2 - 1
    x, c, s = npu_leaf(x0, dtype), npu_leaf(c0, dtype), npu_leaf(s0, dtype)
    out = torch_npu.npu_rotary_mul(x, c, s, rotary_mode=mode)
    xr, cr, sr = cpu_leaf(x0, dtype), cpu_leaf(c0, dtype), cpu_leaf(s0, dtype)
    ref = xr * cr + rotate_reference(xr, mode) * sr
    assert out.dtype == dtype and out.shape == ref.shape
    assert_close(out, ref, dtype)
    backward_both(out, ref, torch.randn(x_shape))
    assert_close(x.grad, xr.grad, dtype)
    broadcast = math.prod(x_shape) // math.prod(r_shape)
    assert_close(c.grad, cr.grad, dtype, scale=max(1, broadcast))
    assert_close(s.grad, sr.grad, dtype, scale=max(1, broadcast))


def test_rotary_mul_with_rotate_matrix(dtype):
    d = 8
    half = d // 2
    rotate = torch.zeros(d, d)
    rotate[:half, half:] = torch.eye(half)
    rotate[half:, :half] = -torch.eye(half)
    x0, c0, s0 = torch.randn(2, 3, 4, d), torch.rand(1, 3, 1, d), torch.rand(1, 3, 1, d)
    out = torch_npu.npu_rotary_mul(
        x0.to(dtype).npu(), c0.to(dtype).npu(), s0.to(dtype).npu(), "half", rotate.to(dtype).npu()
    )
    x, c, s = (t.to(dtype).double() for t in (x0, c0, s0))
    ref = x * c + (x @ rotate.double()) * s
    assert_close(out, ref, dtype)
    # The documented matrix reproduces the "half" rotation.
    assert_close(out, x * c + rotate_reference(x, "half") * s, dtype)


@pytest.mark.parametrize("layout", ["BSND", "SBND", "BNSD", "TND"])
@pytest.mark.parametrize("rotary_dim", [16, 8])
def test_apply_rotary_pos_emb_updates_query_and_key_in_place(dtype, layout, rotary_dim):
    d = 16
    if layout == "TND":
        q_shape, k_shape, c_shape = (6, 4, d), (6, 2, d), (6, 1, rotary_dim)
    else:
        dims = {"B": 2, "S": 3}
        q_shape = tuple({**dims, "N": 4, "D": d}[c] for c in layout)
        k_shape = tuple({**dims, "N": 2, "D": d}[c] for c in layout)
        c_shape = tuple({**dims, "N": 1, "D": rotary_dim}[c] for c in layout)
    q0, k0 = torch.randn(q_shape), torch.randn(k_shape)
    c0, s0 = torch.rand(c_shape) * 2 - 1, torch.rand(c_shape) * 2 - 1
    q, k = q0.to(dtype).npu(), k0.to(dtype).npu()
    q_out, k_out = torch_npu.npu_apply_rotary_pos_emb(
        q, k, c0.to(dtype).npu(), s0.to(dtype).npu(), layout=layout
    )
    assert q_out is q and k_out is k
    c, s = c0.to(dtype).double(), s0.to(dtype).double()

    def reference(t):
        rot, rest = t[..., :rotary_dim], t[..., rotary_dim:]
        return torch.cat((rot * c + rotate_reference(rot, "half") * s, rest), dim=-1)

    assert_close(q, reference(q0.to(dtype).double()), dtype)
    assert_close(k, reference(k0.to(dtype).double()), dtype)


def test_apply_rotary_pos_emb_operator_is_functional(dtype):
    q0, k0, c0, s0 = torch.randn(1, 4, 2, 8), torch.randn(1, 4, 2, 8), torch.rand(1, 4, 1, 8), torch.rand(1, 4, 1, 8)
    q, k = q0.to(dtype).npu(), k0.to(dtype).npu()
    q_new, k_new = torch.ops.npu.npu_apply_rotary_pos_emb(q, k, c0.to(dtype).npu(), s0.to(dtype).npu())
    assert torch.equal(q.cpu(), q0.to(dtype)) and torch.equal(k.cpu(), k0.to(dtype))
    torch_npu.npu_apply_rotary_pos_emb(q, k, c0.to(dtype).npu(), s0.to(dtype).npu())
    assert torch.equal(q.cpu(), q_new.cpu()) and torch.equal(k.cpu(), k_new.cpu())


# --- activations ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,dim", [((4, 6, 16), -1), ((4, 6, 16), 1), ((8, 10), 0)])
def test_swiglu(dtype, shape, dim):
    x0 = torch.randn(shape)
    x = npu_leaf(x0, dtype)
    out = torch_npu.npu_swiglu(x, dim=dim)
    xr = cpu_leaf(x0, dtype)
    a, b = torch.chunk(xr, 2, dim=dim)
    ref = a * torch.sigmoid(a) * b
    assert out.dtype == dtype and out.shape == ref.shape
    assert_close(out, ref, dtype)
    backward_both(out, ref, torch.randn(ref.shape))
    assert_close(x.grad, xr.grad, dtype, scale=2)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(dtype, approximate):
    x0 = torch.randn(5, 33) * 3
    x = npu_leaf(x0, dtype)
    out = torch_npu.npu_gelu(x, approximate=approximate)
    xr = cpu_leaf(x0, dtype)
    if approximate == "none":
        ref = xr * 0.5 * (1 + torch.erf(xr / math.sqrt(2)))
    else:
        ref = 0.5 * xr * (1 + torch.tanh(math.sqrt(2 / math.pi) * (xr + 0.044715 * xr**3)))
    assert_close(out, ref, dtype)
    backward_both(out, ref, torch.randn(5, 33))
    assert_close(x.grad, xr.grad, dtype, scale=2)


def test_silu(dtype):
    x0 = torch.randn(7, 19) * 3
    x = npu_leaf(x0, dtype)
    out = torch_npu.npu_silu(x)
    xr = cpu_leaf(x0, dtype)
    ref = xr * torch.sigmoid(xr)
    assert_close(out, ref, dtype)
    backward_both(out, ref, torch.randn(7, 19))
    assert_close(x.grad, xr.grad, dtype, scale=2)


# --- scaled masked softmax ----------------------------------------------------------------------

@pytest.mark.parametrize("fixed_triu_mask", [False, True])
@pytest.mark.parametrize("mask_shape", [(2, 3, 8, 16), (2, 1, 8, 16), (8, 16)])
def test_scaled_masked_softmax(dtype, fixed_triu_mask, mask_shape):
    shape = (2, 3, 8, 16)
    x0 = torch.randn(shape) * 4
    mask0 = torch.rand(mask_shape) > 0.7
    x = npu_leaf(x0, dtype)
    out = torch_npu.npu_scaled_masked_softmax(x, mask0.npu(), 0.3, fixed_triu_mask)
    xr = cpu_leaf(x0, dtype)
    mask = torch.ones(8, 16, dtype=torch.bool).triu(1) if fixed_triu_mask else mask0
    ref = torch.softmax((xr * 0.3).masked_fill(mask, -10000.0), dim=-1)
    assert out.dtype == dtype
    assert_close(out, ref, dtype)
    backward_both(out, ref, torch.randn(shape))
    assert_close(x.grad, xr.grad, dtype)


# --- layout and casts --------------------------------------------------------------------------

@pytest.mark.parametrize(
    "perm,shape,transpose_first",
    [((0, 2, 1, 3), (2, 4, 18), True), ((0, 2, 1), (2, 6, 12), False), ((1, 0), (12, 12), False)],
)
def test_confusion_transpose(dtype, perm, shape, transpose_first):
    x0 = torch.randn(2, 3, 4, 6)
    x = npu_leaf(x0, dtype)
    out = torch_npu.npu_confusion_transpose(x, list(perm), list(shape), transpose_first)
    xr = cpu_leaf(x0, dtype)
    ref = xr.permute(perm).reshape(shape) if transpose_first else xr.reshape(shape).permute(perm)
    assert out.is_contiguous() and out.shape == ref.shape
    assert_close(out, ref, dtype)
    backward_both(out, ref, torch.randn(ref.shape))
    assert_close(x.grad, xr.grad, dtype)


@pytest.mark.parametrize("target", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int8])
def test_dtype_cast(dtype, target):
    x0 = torch.randn(5, 6) * 50
    x = npu_leaf(x0, dtype)
    out = torch_npu.npu_dtype_cast(x, target)
    assert out.dtype == target and out.data_ptr() != x.data_ptr()
    torch.testing.assert_close(out.cpu(), x0.to(dtype).to(target))
    if target.is_floating_point:
        out.backward(torch.ones(5, 6, dtype=target, device="npu"))
        assert x.grad.dtype == dtype
        torch.testing.assert_close(x.grad.cpu(), torch.ones(5, 6, dtype=dtype))
    else:
        assert not out.requires_grad


# --- MoE routing --------------------------------------------------------------------------------

@pytest.mark.parametrize("with_finished", [False, True])
@pytest.mark.parametrize("shape,k", [((10, 16), 2), ((2, 5, 8), 3), ((7, 4), 4)])
def test_moe_gating_top_k_softmax(dtype, with_finished, shape, k):
    x0 = torch.randn(shape)
    finished0 = torch.rand(shape[:-1]) > 0.6 if with_finished else None
    y, expert_idx, row_idx = torch_npu.npu_moe_gating_top_k_softmax(
        x0.to(dtype).npu(), None if finished0 is None else finished0.npu(), k=k
    )
    probs = torch.softmax(x0.to(dtype).double(), dim=-1)
    order = torch.argsort(-probs, dim=-1, stable=True)[..., :k]
    y_ref = torch.gather(probs, -1, order)
    experts = shape[-1]
    if finished0 is not None:
        order = torch.where(finished0.unsqueeze(-1), experts, order)
    rows = math.prod(shape[:-1])
    row_ref = torch.arange(rows * k).reshape(k, rows).t().reshape(*shape[:-1], k)
    assert (y.dtype, expert_idx.dtype, row_idx.dtype) == (dtype, torch.int32, torch.int32)
    assert_close(y, y_ref, dtype)
    assert torch.equal(expert_idx.cpu().long(), order)
    assert torch.equal(row_idx.cpu().long(), row_ref)


@pytest.mark.parametrize("active_num", [3, 10, 1])
def test_moe_init_routing_matches_the_documented_numpy_logic(dtype, active_num):
    n, hidden, k = 6, 5, 2
    x0 = torch.randn(n, hidden).to(dtype)
    row_idx = torch.arange(n * k, dtype=torch.int32).reshape(k, n).t().contiguous()
    expert_idx = torch.randint(0, 4, (n, k), dtype=torch.int32)
    expanded_x, expanded_row_idx, expanded_expert_idx = torch_npu.npu_moe_init_routing(
        x0.npu(), row_idx.npu(), expert_idx.npu(), active_num
    )
    # The Ascend documentation's equivalent code, written with torch on cpu.
    order = torch.argsort(expert_idx.reshape(-1), stable=True)
    sorted_experts = expert_idx.reshape(-1)[order]
    dst_to_src = row_idx.reshape(-1)[order]
    row_ref = torch.zeros(n * k, dtype=torch.int32)
    row_ref[dst_to_src.long()] = torch.arange(n * k, dtype=torch.int32)
    active = min(active_num, n) * k
    x_ref = x0[dst_to_src[:active].long() % n]
    assert torch.equal(expanded_x.cpu(), x_ref)
    assert torch.equal(expanded_row_idx.cpu(), row_ref)
    assert torch.equal(expanded_expert_idx.cpu(), sorted_experts)
