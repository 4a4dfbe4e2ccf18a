"""F.scaled_dot_product_attention on npu takes the fused (overrideable) path and equals cpu SDPA.

The runtime registers ATen's SDPA choice stub for npu; these tests check the choice, that a
dispatch trace shows the fused op and no bmm/softmax (the math path), results and gradients
against cpu SDPA for masks, causal, GQA, 3-D inputs and every float dtype, dropout, and that the
path compiles and exports.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import torch_npu  # noqa: F401
from attention_reference import attention

NPU = torch.device("npu", 0)
OVERRIDEABLE = 4  # torch.nn.attention.SDPBackend.OVERRIDEABLE
TOL = {torch.float32: dict(atol=2e-5, rtol=2e-4), torch.float16: dict(atol=3e-3, rtol=3e-3),
       torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}


class OpTrace(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def gen(seed):
    return torch.Generator().manual_seed(seed)


def inputs(case, dtype, seed=0):
    g = gen(seed)
    b, hq, hkv, sq, skv, d = case.get("shape", (2, 4, 4, 13, 17, 16))
    q = torch.randn(b, hq, sq, d, generator=g).to(dtype)
    k = torch.randn(b, hkv, skv, d, generator=g).to(dtype)
    v = torch.randn(b, hkv, skv, d, generator=g).to(dtype)
    kwargs = {}
    if case.get("mask") == "bool":
        kwargs["attn_mask"] = torch.rand(b, 1, sq, skv, generator=g) > 0.3
    elif case.get("mask") == "float":
        kwargs["attn_mask"] = torch.randn(sq, skv, generator=g).to(dtype)
    if case.get("causal"):
        kwargs["is_causal"] = True
    if hq != hkv:
        kwargs["enable_gqa"] = True
    if case.get("scale"):
        kwargs["scale"] = case["scale"]
    if case.get("three_d"):
        q, k, v = q[0], k[0], v[0]
    return q, k, v, kwargs


CASES = {
    "plain": {},
    "causal": dict(causal=True),
    "causal_more_keys": dict(causal=True, shape=(2, 4, 4, 9, 21, 16)),
    "bool_mask": dict(mask="bool"),
    "float_mask": dict(mask="float", scale=0.3),
    "gqa": dict(shape=(2, 8, 2, 13, 17, 16), causal=True),
    "three_d": dict(three_d=True, causal=True),
}


def run(q, k, v, kwargs, device, grad_seed=1):
    leaves = [t.clone().to(device).requires_grad_() for t in (q, k, v)]
    kw = {a: (b.to(device) if isinstance(b, torch.Tensor) else b) for a, b in kwargs.items()}
    out = F.scaled_dot_product_attention(*leaves, **kw)
    g = torch.randn(out.shape, generator=gen(grad_seed)).to(out.dtype)
    out.backward(g.to(device))
    return out, [t.grad for t in leaves]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_equals_cpu_sdpa(name, dtype):
    q, k, v, kwargs = inputs(CASES[name], dtype)
    want, want_grads = run(q, k, v, kwargs, "cpu")
    got, got_grads = run(q, k, v, kwargs, NPU)
    assert got.device == NPU and got.dtype == dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, **TOL[dtype])
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a.cpu(), b, **{k_: 2 * v_ for k_, v_ in TOL[dtype].items()})


def test_float_mask_gradient_equals_cpu():
    q, k, v, kwargs = inputs(dict(mask="float"), torch.float32, seed=3)
    masks = [kwargs["attn_mask"].clone().to(dev).requires_grad_() for dev in ("cpu", NPU)]
    outs = [F.scaled_dot_product_attention(q.to(m.device), k.to(m.device), v.to(m.device), attn_mask=m) for m in masks]
    for o in outs:
        o.sum().backward()
    torch.testing.assert_close(outs[1].cpu(), outs[0], atol=2e-5, rtol=2e-4)
    torch.testing.assert_close(masks[1].grad.cpu(), masks[0].grad, atol=2e-5, rtol=2e-4)


def test_fully_masked_rows_match_cpu():
    q, k, v, _ = inputs({}, torch.float32, seed=4)
    mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool)
    mask[3] = False
    want, want_grads = run(q, k, v, dict(attn_mask=mask), "cpu")
    got, got_grads = run(q, k, v, dict(attn_mask=mask), NPU)
    torch.testing.assert_close(got.cpu(), want)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a.cpu(), b)


def test_dispatch_trace_shows_fused_path_not_math():
    q, k, v, kwargs = inputs(dict(causal=True), torch.float32)
    leaves = [t.to(NPU).requires_grad_() for t in (q, k, v)]
    with OpTrace() as trace:
        out = F.scaled_dot_product_attention(*leaves, **kwargs)
        out.sum().backward()
    assert "aten._scaled_dot_product_fused_attention_overrideable" in trace.ops
    assert "aten._scaled_dot_product_fused_attention_overrideable_backward" in trace.ops
    math_ops = {"aten.bmm", "aten.matmul", "aten._softmax", "aten._safe_softmax", "aten.softmax"}
    assert not math_ops & set(trace.ops), trace.ops


def test_choice_answers_overrideable_only_where_the_kernels_serve():
    q, k, v, _ = inputs({}, torch.float32)
    assert torch._fused_sdp_choice(q.to(NPU), k.to(NPU), v.to(NPU)) == OVERRIDEABLE
    # Different head counts without enable_gqa stay on the math path, which raises
    # PyTorch's own error, as on cpu.
    q8 = torch.randn(2, 8, 13, 16)
    errors = []
    for dev in ("cpu", NPU):
        with pytest.raises(RuntimeError) as info:
            F.scaled_dot_product_attention(q8.to(dev), k.to(dev), v.to(dev))
        errors.append(str(info.value).split("\n")[0])
    assert errors[0] == errors[1]
    # float64 is not served by the fused kernels: the math path gives cpu's numbers.
    qd, kd, vd = (t.double() for t in (q, k, v))
    assert torch._fused_sdp_choice(qd.to(NPU), kd.to(NPU), vd.to(NPU)) == 0
    torch.testing.assert_close(F.scaled_dot_product_attention(qd.to(NPU), kd.to(NPU), vd.to(NPU)).cpu(),
                               F.scaled_dot_product_attention(qd, kd, vd))


def test_dropout_is_reproducible_and_backward_uses_the_forward_mask():
    g = gen(9)
    b, h, sq, skv, d = 1, 2, 24, 20, 8
    q, k = torch.randn(b, h, sq, d, generator=g).to(NPU), torch.randn(b, h, skv, d, generator=g).to(NPU)
    eye = torch.eye(skv).expand(b, h, skv, skv).contiguous().to(NPU)
    torch.npu.manual_seed(17)
    dropped = F.scaled_dot_product_attention(q, k, eye, dropout_p=0.3)
    full = F.scaled_dot_product_attention(q, k, eye)
    keep = (dropped / full).cpu()
    assert abs((keep > 0).float().mean().item() - 0.7) < 0.05
    torch.npu.manual_seed(17)
    assert torch.equal(F.scaled_dot_product_attention(q, k, eye, dropout_p=0.3).cpu(), dropped.cpu())
    # The mask depends only on the seed and the element: reuse it with a random value.
    v = torch.randn(b, h, skv, d, generator=g)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v.to(NPU))]
    torch.npu.manual_seed(17)
    out = F.scaled_dot_product_attention(*leaves, dropout_p=0.3)
    out.sum().backward()
    ref_leaves = [t.detach().cpu().double().requires_grad_() for t in (q, k, v)]
    ref = attention(*ref_leaves, 1 / d ** 0.5, keep=keep)
    ref.sum().backward()
    torch.testing.assert_close(out.cpu().double(), ref, atol=1e-5, rtol=1e-4)
    for a, r in zip(leaves, ref_leaves):
        torch.testing.assert_close(a.grad.cpu().double(), r.grad, atol=2e-5, rtol=2e-4)


class _Block(torch.nn.Module):
    """Attention the way transformers lays it out: [B, S, N, D] projections transposed to
    [B, N, S, D] views, fewer key/value heads."""

    def forward(self, x, y, z):
        q = x.unflatten(-1, (8, 16)).transpose(1, 2)
        k = y.unflatten(-1, (2, 16)).transpose(1, 2)
        v = z.unflatten(-1, (2, 16)).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return out.transpose(1, 2).flatten(-2)


def _block_inputs(device):
    g = gen(13)
    return [torch.randn(2, 11, h, generator=g).to(device).requires_grad_() for h in (128, 32, 32)]


def test_compile_fullgraph_equals_cpu():
    want_in, got_in = _block_inputs("cpu"), _block_inputs(NPU)
    want = _Block()(*want_in)
    want.sum().backward()
    got = torch.compile(_Block(), fullgraph=True)(*got_in)
    got.sum().backward()
    torch.testing.assert_close(got.cpu(), want, atol=2e-5, rtol=2e-4)
    for a, b in zip(got_in, want_in):
        torch.testing.assert_close(a.grad.cpu(), b.grad, atol=2e-5, rtol=2e-4)


def test_export_equals_cpu():
    cpu_in = [t.detach() for t in _block_inputs("cpu")]
    npu_in = [t.to(NPU) for t in cpu_in]
    exported = torch.export.export(_Block(), tuple(npu_in))
    with OpTrace() as trace:
        got = exported.module()(*npu_in)
    assert "aten._scaled_dot_product_fused_attention_overrideable" in trace.ops
    torch.testing.assert_close(got.cpu(), _Block()(*cpu_in), atol=2e-5, rtol=2e-4)


def test_no_score_matrix_is_allocated():
    g = gen(5)
    q, k, v = (torch.randn(1, 8, 1024, 64, generator=g).to(NPU) for _ in range(3))
    base = torch.npu.memory_allocated()
    torch.npu.reset_peak_memory_stats()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    peak = torch.npu.max_memory_allocated() - base
    scores = 8 * 1024 * 1024 * 4
    assert peak < out.numel() * 4 + scores // 8, peak
