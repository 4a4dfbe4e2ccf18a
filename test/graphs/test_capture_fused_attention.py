"""Capture of attention: SDPA and npu_fusion_attention on npu record their fused kernels.

Regression: SDPA on npu runs the runtime's fused kernels (``npu::_fused_attention_forward``
and ``_backward``), which had no shape function, so every NPU graph capture of an
attention model (GPT-2, BERT, Llama under ``npugraphs`` / ``npugraph_ex``) aborted and
the model ran eagerly. Replays with new input values are compared with cpu eager.
"""
import pytest
import torch
import torch.nn.functional as F

import torch_npu
from graphs_compare import assert_close_to_cpu


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_forward_and_backward_captured_and_replayed(causal):
    shape = (2, 2, 8, 16)
    q, k, v = (torch.randn(shape, device="npu", requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, device="npu")

    def step():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), grad)
        return out, dq, dk, dv

    step()  # warm-up outside the capture, as on CUDA
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        results = step()
    for _ in range(2):
        new = [torch.randn(shape) for _ in range(4)]
        with torch.no_grad():
            for dst, src in zip((q, k, v, grad), new):
                dst.copy_(src.npu())
        g.replay()
        q_c, k_c, v_c = (t.clone().requires_grad_() for t in new[:3])
        out_c = F.scaled_dot_product_attention(q_c, k_c, v_c, is_causal=causal)
        expected = (out_c, *torch.autograd.grad(out_c, (q_c, k_c, v_c), new[3]))
        for actual, want in zip(results, expected):
            assert_close_to_cpu(actual, want)


def test_npu_fusion_attention_captured_and_replayed():
    q, k, v = (torch.randn(2, 8, 2, 16, device="npu") for _ in range(3))

    def run():
        return torch_npu.npu_fusion_attention(q, k, v, 2, "BSND", scale=0.25)[0]

    expected_before = run().cpu()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = run()
    out.zero_()
    g.replay()
    assert_close_to_cpu(out, expected_before)
    q.mul_(2)
    g.replay()
    assert not torch.allclose(out.cpu(), expected_before)
    assert_close_to_cpu(out, run().cpu())
