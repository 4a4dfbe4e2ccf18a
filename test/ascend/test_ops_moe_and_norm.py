"""npu_moe_compute_expert_tokens, npu_moe_finalize_routing and npu_group_norm_silu against
Ascend's documented reference code (NumPy, float64) and torch's GroupNorm + SiLU."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from npu_ops_compare import assert_close, opcheck

import torch_npu


def test_moe_compute_expert_tokens():
    sorted_experts = torch.tensor([0, 0, 0, 1, 1, 2, 4, 4], dtype=torch.int32)
    out = torch_npu.npu_moe_compute_expert_tokens(sorted_experts.npu(), 6)
    counts = torch.bincount(sorted_experts.long(), minlength=6).cumsum(0)
    assert out.dtype == torch.int32 and torch.equal(out.cpu().long(), counts)
    assert str(inspect.signature(torch_npu.npu_moe_compute_expert_tokens)) == "(sorted_experts, num_experts=1)"


def finalize_reference(rows, skip1, skip2, bias, scales, src_to_dst, experts, row_order=False):
    """Ascend's documented NumPy reference (column order), in float64; row order by index."""
    nk = src_to_dst.shape[0]
    k = scales.shape[1] if scales is not None else 1
    num_rows, h = nk // k, rows.shape[-1]
    rows = rows.reshape(-1, h)
    out = np.zeros((num_rows, h))
    if skip1 is not None:
        out = out + skip1
    if skip2 is not None:
        out = out + skip2
    for i in range(num_rows):
        for j in range(k):
            value = src_to_dst[i * k + j] if row_order else src_to_dst[j * num_rows + i]
            dst_row = 0 if value == -1 else rows[value, :]
            s = 1.0 if scales is None else scales[i, j]
            out[i] += s * (dst_row + (bias[experts[i, j]] if bias is not None else 0))
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("mode", [0, 2])
def test_moe_finalize_routing_drop_less(dtype, mode):
    experts_n, h, k, rows_n = 6, 8, 3, 5
    g = torch.Generator().manual_seed(mode)
    rows = torch.randn(rows_n * k, h, generator=g).to(dtype)
    skip1, skip2 = torch.randn(rows_n, h, generator=g).to(dtype), torch.randn(rows_n, h, generator=g).to(dtype)
    bias = torch.randn(experts_n, h, generator=g).to(dtype)
    scales = torch.randn(rows_n, k, generator=g).to(dtype)
    src_to_dst = torch.randperm(rows_n * k, generator=g).to(torch.int32)
    experts = torch.randint(0, experts_n, (rows_n, k), generator=g, dtype=torch.int32)
    out = torch_npu.npu_moe_finalize_routing(rows.npu(), skip1.npu(), skip2.npu(), bias.npu(), scales.npu(),
                                             src_to_dst.npu(), experts.npu(), drop_pad_mode=mode)
    ref = finalize_reference(*(t.double().numpy() if t.is_floating_point() else t.numpy()
                               for t in (rows, skip1, skip2, bias, scales, src_to_dst, experts)), row_order=mode == 2)
    assert out.dtype == dtype
    assert_close(out, torch.from_numpy(ref), dtype, scale=4)


def test_moe_finalize_routing_drop_pad_without_scales():
    experts_n, c, h, rows_n = 4, 3, 6, 7
    rows = torch.randn(experts_n, c, h)
    skip1 = torch.randn(rows_n, h)
    src_to_dst = torch.tensor([0, 5, -1, 7, 11, -1, 2], dtype=torch.int32)
    experts = torch.randint(0, experts_n, (rows_n, 1), dtype=torch.int32)
    bias = torch.randn(experts_n, h)
    out = torch_npu.npu_moe_finalize_routing(rows.npu(), skip1.npu(), None, bias.npu(), None, src_to_dst.npu(),
                                             experts.npu(), drop_pad_mode=1)
    ref = finalize_reference(rows.double().numpy(), skip1.double().numpy(), None, bias.double().numpy(), None,
                             src_to_dst.numpy(), experts.numpy())
    assert_close(out, torch.from_numpy(ref), torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_silu_against_torch(dtype, affine):
    x = torch.randn(2, 12, 5, 7).to(dtype)
    w = (torch.rand(12) + 0.5) if affine else None
    b = torch.randn(12) if affine else None
    y, mean, rstd = torch_npu.npu_group_norm_silu(x.npu(), None if w is None else w.npu(), None if b is None else b.npu(), 4, 1e-5)
    xd = x.double()
    ref = F.silu(F.group_norm(xd, 4, None if w is None else w.double(), None if b is None else b.double(), 1e-5))
    grouped = xd.reshape(2, 4, -1)
    assert y.dtype == mean.dtype == rstd.dtype == dtype and mean.shape == (2, 4)
    assert_close(y, ref, dtype, scale=4)
    assert_close(mean, grouped.mean(-1), dtype, scale=2)
    assert_close(rstd, 1 / torch.sqrt(grouped.var(-1, unbiased=False) + 1e-5), dtype, scale=4)


def test_errors_and_opcheck():
    with pytest.raises(ValueError, match="group=5 must be positive and divide"):
        torch_npu.npu_group_norm_silu(torch.randn(2, 12, 3, device="npu"), None, None, 5)
    with pytest.raises(ValueError, match="skip2 is given without skip1"):
        torch_npu.npu_moe_finalize_routing(torch.randn(4, 2, device="npu"), None, torch.randn(4, 2, device="npu"), None, None,
                                           torch.arange(4, dtype=torch.int32, device="npu"), None)
    with pytest.raises(ValueError, match=r"num_expert=0 must be in \(0, 2048\]"):
        torch_npu.npu_moe_compute_expert_tokens(torch.zeros(3, dtype=torch.int32, device="npu"), 0)
    opcheck(torch.ops.npu.npu_group_norm_silu.default, (torch.randn(2, 8, 3, 3, device="npu"), torch.rand(8, device="npu"), None, 2, 1e-5))
    opcheck(torch.ops.npu.npu_moe_compute_expert_tokens.default, (torch.tensor([0, 1, 1, 3], dtype=torch.int32, device="npu"), 4))
    opcheck(torch.ops.npu.npu_moe_finalize_routing.default, (
        torch.randn(6, 4, device="npu"), torch.randn(3, 4, device="npu"), None, torch.randn(5, 4, device="npu"),
        torch.rand(3, 2, device="npu"), torch.randperm(6, device="npu").int(), torch.randint(0, 5, (3, 2), dtype=torch.int32, device="npu"), 0))
