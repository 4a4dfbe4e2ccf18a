"""Every new top-level operator that Inductor decomposes compiles (fullgraph) into code without
the opaque call and gives the eager result; the data-dependent ones stay calls and match too."""
from __future__ import annotations

import pytest
import torch
from torch._inductor.utils import run_and_get_code

import torch_npu

D = "npu"


def _cases():
    x = torch.randn(4, 16, device=D)
    return {
        "npu_fast_gelu": (lambda t: torch_npu.npu_fast_gelu(t) * 2, (x,)),
        "npu_geglu": (lambda t: torch_npu.npu_geglu(t, approximate=0, activate_left=True)[0] + 1, (x,)),
        "npu_pad": (lambda t: torch_npu.npu_pad(t, [1, 0, 0, 2]) - 1, (x,)),
        "npu_slice": (lambda t: torch_npu.npu_slice(t, [1, 2], [2, 5]) * 3, (x,)),
        "npu_stride_add": (lambda a, b: torch_npu.npu_stride_add(a, b, 0, 1, 1), (torch.randn(1, 40, 2, 2, device=D), torch.randn(1, 40, 2, 2, device=D))),
        "npu_one_hot": (lambda t: torch_npu.npu_one_hot(t, depth=5) * 2, (torch.tensor([1, 4, 7, 0], device=D),)),
        "npu_scatter_nd_update": (lambda t, i, u: torch_npu.npu_scatter_nd_update(t, i, u) + 1, (x, torch.tensor([[1], [3]], device=D), torch.randn(2, 16, device=D))),
        "npu_sign_bits_pack": (lambda t: torch_npu.npu_sign_bits_pack(t, 2), (torch.randn(30, device=D),)),
        "npu_quantize": (lambda t, s: torch_npu.npu_quantize(t, s, None, torch.qint8, -1, True), (x * 20, torch.rand(16, device=D) + 0.5)),
        "npu_anti_quant": (lambda t, s: torch_npu.npu_anti_quant(t, s) * 2, (torch.randint(-9, 9, (4, 16), dtype=torch.int8, device=D), torch.rand(16, device=D))),
        "npu_dynamic_quant_asymmetric": (lambda t: torch_npu.npu_dynamic_quant_asymmetric(t), (x.half(),)),
        "npu_group_norm_silu": (lambda t: torch_npu.npu_group_norm_silu(t, None, None, 2)[0], (torch.randn(2, 4, 3, 3, device=D),)),
        "npu_softmax_cross_entropy_with_logits": (lambda a, b: torch_npu.npu_softmax_cross_entropy_with_logits(a, b), (x, torch.softmax(torch.randn(4, 16, device=D), -1))),
        "npu_linear": (lambda a, w: torch_npu.npu_linear(a, w) + 1, (x, torch.randn(5, 16, device=D))),
        "npu_bmmV2": (lambda a, b: torch_npu.npu_bmmV2(a, b, []) * 2, (torch.randn(2, 3, 4, device=D), torch.randn(2, 4, 5, device=D))),
    }


OPAQUE = {
    "npu_iou": (lambda a, b: torch_npu.npu_iou(a, b) + 1, (torch.tensor([[0.0, 0, 2, 2], [1, 1, 3, 4]], device=D), torch.tensor([[0.0, 0, 1, 1]], device=D))),
    "npu_nms_v4": (lambda b, s: torch_npu.npu_nms_v4(b, s, 3, torch.tensor(0.5, device=D), torch.tensor(0.0, device=D))[0] + 0,
                   (torch.tensor([[0.0, 0, 2, 2], [0.1, 0, 2, 2], [5, 5, 6, 6]], device=D), torch.tensor([0.9, 0.8, 0.7], device=D))),
}


@pytest.mark.parametrize("name", sorted(_cases()))
def test_decomposed_operator_compiles_without_the_opaque_call(name, fresh_compiled_state):
    fn, args = _cases()[name]
    compiled = torch.compile(fn, backend="inductor", fullgraph=True)
    out, code = run_and_get_code(compiled, *args)
    expected = fn(*args)
    for got, want in zip(out if isinstance(out, tuple) else (out,), expected if isinstance(expected, tuple) else (expected,)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert f"torch.ops.npu.{name}" not in "\n".join(code)


@pytest.mark.parametrize("name", sorted(OPAQUE))
def test_data_dependent_operators_stay_calls_and_match(name, fresh_compiled_state):
    fn, args = OPAQUE[name]
    out, code = run_and_get_code(torch.compile(fn, backend="inductor", fullgraph=True), *args)
    torch.testing.assert_close(out, fn(*args))
    assert f"torch.ops.npu.{name}" in "\n".join(code)
