"""F.scaled_dot_product_attention on npu gives cpu's bits: cpu's choice, cpu's kernels.

The runtime answers ATen's SDPA choice stub for npu with cpu's own choice, so npu runs cpu's
flash kernel (_scaled_dot_product_flash_attention_for_cpu and its backward, through the
operator fallback) or cpu's math path exactly where cpu does. These tests check the choice
and the dispatched ops against cpu, results and gradients with torch.equal for masks,
causal, GQA, 3-D inputs, every float dtype and dropout (seeded alike), that the runtime's
fused kernels stay reachable through sdpa_kernel(OVERRIDEABLE), and that the path compiles
and exports.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import torch_npu  # noqa: F401
from philox_reference import twister_state

NPU = torch.device("npu", 0)
MATH, FLASH, OVERRIDEABLE = 0, 1, 4  # torch.nn.attention.SDPBackend values
TOL = {torch.float32: dict(atol=2e-5, rtol=2e-4), torch.float16: dict(atol=3e-3, rtol=3e-3),
       torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


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


def assert_bits_equal(got, want, what):
    assert got.device == NPU, what
    assert got.dtype == want.dtype and got.shape == want.shape, what
    assert torch.equal(got.cpu(), want), f"{what}: max difference {(got.cpu() - want).abs().max()}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_bit_equal_to_cpu_sdpa(name, dtype):
    q, k, v, kwargs = inputs(CASES[name], dtype)
    want, want_grads = run(q, k, v, kwargs, "cpu")
    got, got_grads = run(q, k, v, kwargs, NPU)
    assert_bits_equal(got, want, "output")
    for what, a, b in zip("qkv", got_grads, want_grads):
        assert_bits_equal(a, b, f"grad of {what}")


@pytest.mark.parametrize("name", list(CASES))
def test_choice_and_dispatched_ops_are_cpus(name):
    q, k, v, kwargs = inputs(CASES[name], torch.float32)
    traces = []
    for dev in ("cpu", NPU):
        leaves = [t.to(dev).requires_grad_() for t in (q, k, v)]
        kw = {a: (b.to(dev) if isinstance(b, torch.Tensor) else b) for a, b in kwargs.items()}
        choice_kw = {a: b for a, b in kw.items() if a != "attn_mask"}
        assert torch._fused_sdp_choice(*leaves, kw.get("attn_mask"), **choice_kw) == torch._fused_sdp_choice(
            *(t.cpu() for t in leaves), kwargs.get("attn_mask"), **{a: b for a, b in kwargs.items() if a != "attn_mask"})
        with OpTrace() as trace:
            # autograd.grad: no AccumulateGrad, whose copies into .grad differ by device.
            torch.autograd.grad(F.scaled_dot_product_attention(*leaves, **kw).sum(), leaves)
        traces.append(trace.ops)
    assert traces[1] == traces[0]
    assert "aten._scaled_dot_product_fused_attention_overrideable" not in traces[1]


def test_flash_choice_runs_cpus_flash_kernel_forward_and_backward():
    q, k, v, kwargs = inputs(dict(causal=True), torch.float32)
    leaves = [t.to(NPU).requires_grad_() for t in (q, k, v)]
    assert torch._fused_sdp_choice(*leaves, is_causal=True) == FLASH
    with OpTrace() as trace:
        F.scaled_dot_product_attention(*leaves, **kwargs).sum().backward()
    assert "aten._scaled_dot_product_flash_attention_for_cpu" in trace.ops
    assert "aten._scaled_dot_product_flash_attention_for_cpu_backward" in trace.ops


def test_float_mask_gradient_bit_equal_to_cpu():
    q, k, v, kwargs = inputs(dict(mask="float"), torch.float32, seed=3)
    masks = [kwargs["attn_mask"].clone().to(dev).requires_grad_() for dev in ("cpu", NPU)]
    outs = [F.scaled_dot_product_attention(q.to(m.device), k.to(m.device), v.to(m.device), attn_mask=m) for m in masks]
    for o in outs:
        o.sum().backward()
    assert_bits_equal(outs[1], outs[0], "output")
    assert_bits_equal(masks[1].grad, masks[0].grad, "grad of the mask")


def test_fully_masked_rows_bit_equal_to_cpu():
    q, k, v, _ = inputs({}, torch.float32, seed=4)
    mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool)
    mask[3] = False
    want, want_grads = run(q, k, v, dict(attn_mask=mask), "cpu")
    got, got_grads = run(q, k, v, dict(attn_mask=mask), NPU)
    assert_bits_equal(got, want, "output")
    for a, b in zip(got_grads, want_grads):
        assert_bits_equal(a, b, "grad")


def test_errors_are_cpus():
    q, k, v, _ = inputs({}, torch.float32)
    q8 = torch.randn(2, 8, 13, 16)
    for args in ((q8, k, v), (q.double(), k, v)):
        errors = []
        for dev in ("cpu", NPU):
            with pytest.raises(RuntimeError) as info:
                F.scaled_dot_product_attention(*(t.to(dev) for t in args))
            errors.append(str(info.value).split("\n")[0])
        assert errors[0] == errors[1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_dropout_is_cpus_kernel_over_the_npu_stream(dtype):
    # npu draws at (seed 17, offset 0) of its Philox stream; cpu given the engine state
    # of that stream draws the same keep-mask, so every bit must agree.
    q, k, v, kwargs = inputs(dict(causal=False), dtype, seed=9)
    torch.set_rng_state(twister_state(17, 0))
    want, want_grads = run(q, k, v, dict(dropout_p=0.3), "cpu")
    torch.npu.manual_seed(17)
    got, got_grads = run(q, k, v, dict(dropout_p=0.3), NPU)
    assert_bits_equal(got, want, "output")
    for a, b in zip(got_grads, want_grads):
        assert_bits_equal(a, b, "grad")
    # Something was dropped, and the same seed drops the same elements again.
    no_dropout, _ = run(q, k, v, {}, NPU)
    assert not torch.equal(got.cpu(), no_dropout.cpu())
    torch.npu.manual_seed(17)
    assert torch.equal(run(q, k, v, dict(dropout_p=0.3), NPU)[0].cpu(), got.cpu())


@pytest.mark.parametrize("name", ["causal", "bool_mask", "gqa", "three_d"])
def test_overrideable_backend_on_request_runs_the_fused_kernels(name):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v, kwargs = inputs(CASES[name], torch.float32)
    want, want_grads = run(q, k, v, kwargs, "cpu")
    with sdpa_kernel([SDPBackend.OVERRIDEABLE]):
        assert torch._fused_sdp_choice(q.to(NPU), k.to(NPU), v.to(NPU),
                                       enable_gqa=kwargs.get("enable_gqa", False)) == OVERRIDEABLE
        with OpTrace() as trace:
            got, got_grads = run(q, k, v, kwargs, NPU)
    assert "aten._scaled_dot_product_fused_attention_overrideable" in trace.ops
    assert "aten._scaled_dot_product_fused_attention_overrideable_backward" in trace.ops
    torch.testing.assert_close(got.cpu(), want, **TOL[torch.float32])
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a.cpu(), b, atol=4e-5, rtol=4e-4)


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
    # Compiled code fuses the ops around attention, so only closeness is promised here.
    torch.testing.assert_close(got.cpu(), want, atol=2e-5, rtol=2e-4)
    for a, b in zip(got_in, want_in):
        torch.testing.assert_close(a.grad.cpu(), b.grad, atol=2e-5, rtol=2e-4)


def test_export_equals_cpu():
    cpu_in = [t.detach() for t in _block_inputs("cpu")]
    npu_in = [t.to(NPU) for t in cpu_in]
    exported = torch.export.export(_Block(), tuple(npu_in))
    with OpTrace() as trace:
        got = exported.module()(*npu_in)
    assert "aten._scaled_dot_product_flash_attention_for_cpu" in trace.ops
    want = _Block()(*cpu_in)
    assert_bits_equal(got, want, "output of the exported program")


def test_no_score_matrix_is_allocated():
    g = gen(5)
    q, k, v = (torch.randn(1, 8, 1024, 64, generator=g).to(NPU) for _ in range(3))
    base = torch.npu.memory_allocated()
    torch.npu.reset_peak_memory_stats()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    peak = torch.npu.max_memory_allocated() - base
    scores = 8 * 1024 * 1024 * 4
    assert peak < out.numel() * 4 + scores // 8, peak
