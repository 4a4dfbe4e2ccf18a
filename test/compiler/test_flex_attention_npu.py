"""FlexAttention on npu: eager, under Inductor (forward and backward), under autocast.

The cpu reference is torch's own dense composite on cpu: the flex higher-order op called
through Dynamo's eager backend, as ``flex_attention`` itself calls it. (The public function
refuses a backward on cpu, "FlexAttention does not support backward on CPU"; the op below
it does not.) Eager npu runs that same composite on npu memory, so it must be bit-equal.
Inductor on npu compiles the composite into fused C++ kernels, which reassociate its sums:
compared within 1e-5 (float32, values of order 1).
"""
from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch._higher_order_ops.flex_attention import flex_attention as flex_attention_hop
from torch.nn.attention.flex_attention import _apply_kernel_options, create_block_mask, flex_attention

import torch_npu  # noqa: F401
from fresh_interpreter import run_python
from torch_npu.compiler.inductor.flex_attention_dense import DENSE_FORM_WARNING

B, H, L, E = 2, 2, 64, 16
DOCUMENT_ENDS = (20, 44, 64)  # three documents per sequence
COMPILED_TOLERANCE = dict(rtol=1e-5, atol=1e-5)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def document_mask(document_id):
    def same_document_causal(b, h, q_idx, kv_idx):
        return (document_id[q_idx] == document_id[kv_idx]) & (q_idx >= kv_idx)

    return same_document_causal


def document_ids(device) -> torch.Tensor:
    ids = torch.zeros(L, dtype=torch.int32)
    for number, (start, end) in enumerate(zip((0, *DOCUMENT_ENDS[:-1]), DOCUMENT_ENDS)):
        ids[start:end] = number
    return ids.to(device)


def head_bias(bias):
    """A score_mod with a captured tensor that requires grad: its gradient is an output.
    (A relative-position slope per head: a bias constant along a row would have a zero
    gradient, softmax being shift-invariant.)"""

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + bias[h] * (q_idx - kv_idx) / L

    return score_mod


def inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, L, E, generator=g) for _ in range(3))
    return q, k, v, torch.randn(H, generator=g)


def run(attention, device, mask: str, q, k, v, bias, *, reference: bool = False):
    """Forward and backward of one attention; returns output and gradients on cpu."""
    q, k, v, bias = (t.detach().clone().to(device).requires_grad_() for t in (q, k, v, bias))
    mask_mod = causal if mask == "causal" else document_mask(document_ids(device))
    block_mask = create_block_mask(mask_mod, None, None, L, L, device=device)
    score_mod = head_bias(bias)
    if reference:
        out = _dense_composite(q, k, v, score_mod, block_mask)
    else:
        out = attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
    out.backward(torch.cos(torch.arange(out.numel(), dtype=torch.float32)).reshape(out.shape).to(device, out.dtype))
    return [t.detach().cpu() for t in (out, q.grad, k.grad, v.grad, bias.grad)]


def _dense_composite(q, k, v, score_mod, block_mask):
    options = _apply_kernel_options(q, k, v, False, None, None)

    def call_op(q, k, v):
        return flex_attention_hop(q, k, v, score_mod, block_mask.as_tuple(), 1 / math.sqrt(E), options)[0]

    return torch.compile(call_op, backend="eager", fullgraph=True)(q, k, v)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("mask", ["causal", "document"])
def test_eager_forward_and_backward_equal_cpu(mask):
    data = inputs()
    expected = run(None, "cpu", mask, *data, reference=True)
    actual = run(flex_attention, "npu", mask, *data)
    for a, e in zip(actual, expected):
        assert torch.equal(a, e)


def test_compiled_forward_and_backward_close_to_cpu_in_dense_form():
    from torch._inductor.utils import run_and_get_code

    data = inputs(1)
    compiled = torch.compile(flex_attention, backend="inductor")
    result = {}

    def step():
        result["causal"] = run(compiled, "npu", "causal", *data)
        result["document"] = run(compiled, "npu", "document", *data)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, sources = run_and_get_code(step)
    for mask in ("causal", "document"):
        for a, e in zip(result[mask], run(None, "cpu", mask, *data, reference=True)):
            torch.testing.assert_close(a, e, **COMPILED_TOLERANCE)
    # Forward and backward of each mask (the document mask captures a tensor: its own graphs),
    # all C++ kernels, no flex attention op left for Inductor to lower.
    assert len(sources) == 4
    for source in sources:
        assert "cpp_fused" in source and "torch.ops.higher_order.flex_attention" not in source
    # Said once per process, on the first rewrite.
    assert [str(w.message) for w in caught if str(w.message) == DENSE_FORM_WARNING][:1] == [DENSE_FORM_WARNING]


def test_dense_form_warning_is_given_once_per_process():
    out = run_python(
        """
        import warnings, torch, torch_npu
        torch._inductor.config.fx_graph_cache = False  # the rewrite runs only on a compile
        from torch.nn.attention.flex_attention import flex_attention
        from torch_npu.compiler.inductor.flex_attention_dense import DENSE_FORM_WARNING
        compiled = torch.compile(flex_attention)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for length in (16, 32):  # two forward and two backward graphs
                q, k, v = (torch.randn(1, 1, length, 8, device="npu", requires_grad=True) for _ in range(3))
                compiled(q, k, v).sum().backward()
        print(sum(str(w.message) == DENSE_FORM_WARNING for w in caught))
        """,
        env={"TORCH_NPU_MEMORY_CAPACITY_MB": "256"},
    )
    assert out.split() == ["1"]


def test_autocast_bf16_eager_and_compiled():
    q, k, v, bias = inputs(2)
    with torch.autocast("npu", dtype=torch.bfloat16):
        eager = run(flex_attention, "npu", "causal", q, k, v, bias)
        compiled = run(torch.compile(flex_attention), "npu", "causal", q, k, v, bias)
    # Autocast casts query, key and value to bf16 (their gradients come back in float32);
    # eager is the composite on those bf16 inputs, as on cpu.
    cast = [t.bfloat16() for t in (q, k, v)]
    expected_out = run(None, "cpu", "causal", *cast, bias, reference=True)[0]
    assert eager[0].dtype == compiled[0].dtype == torch.bfloat16
    assert [t.dtype for t in eager[1:]] == [torch.float32] * 4
    assert torch.equal(eager[0], expected_out)
    # bf16 keeps 8 bits of mantissa, and the compiled kernels round at other places than
    # eager: both are compared with a float64 run, within 3% of each result's largest value
    # (measured: eager 0.6-0.8%, compiled 0.7-1.3%).
    exact = run(None, "cpu", "causal", q.double(), k.double(), v.double(), bias.double(), reference=True)
    for result in (eager, compiled):
        for a, e in zip(result, exact):
            torch.testing.assert_close(a.double(), e, rtol=0, atol=3e-2 * e.abs().max().item())


def test_devices_are_still_checked():
    q, k, v, _ = inputs()
    with pytest.raises(ValueError, match="same device"):
        flex_attention(q.npu(), k, v.npu())
    # cpu keeps torch's own rule.
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        flex_attention(q.requires_grad_(), k, v)


def test_npu_is_accepted_before_anything_imports_dynamo():
    # Without a block mask nothing imports torch._dynamo before flex_attention checks the
    # device: the trigger fires on flex attention's own module.
    out = run_python(
        """
        import sys, torch, torch_npu
        from torch.nn.attention.flex_attention import flex_attention
        print("torch._dynamo" in sys.modules)
        q = torch.randn(1, 1, 16, 8)
        out = flex_attention(q.npu(), q.npu(), q.npu())
        print(torch.equal(out.cpu(), flex_attention(q, q, q)))
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "TORCH_NPU_MEMORY_CAPACITY_MB": "256"},
    )
    assert out.split() == ["False", "True"]
