"""npu_bmmV2, npu_linear, matmul_checksum, npu_softmax_cross_entropy_with_logits,
npu_dropout_with_add_softmax and erase_stream against float64 cpu references (forward and
backward), argument errors and opcheck."""
from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from npu_ops_compare import DTYPES, assert_close, cpu_leaf, npu_leaf, opcheck

import torch_npu

DTYPE_IDS = [str(d).split(".")[-1] for d in DTYPES]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shapes", [((3, 4, 5), (3, 5, 6)), ((2, 1, 4, 5), (3, 5, 2)), ((4, 5), (2, 5, 3))])
def test_npu_bmmV2_forward_and_backward(dtype, shapes):
    a0, b0 = torch.randn(shapes[0]), torch.randn(shapes[1])
    a, b = npu_leaf(a0, dtype), npu_leaf(b0, dtype)
    ar, br = cpu_leaf(a0, dtype), cpu_leaf(b0, dtype)
    out = torch_npu.npu_bmmV2(a, b, [])
    ref = torch.matmul(ar, br)
    assert_close(out, ref, dtype, scale=4)
    seed = torch.randn(ref.shape)
    out.backward(seed.to(dtype).npu())
    ref.backward(seed.to(dtype).double())
    assert a.grad.shape == a0.shape and b.grad.shape == b0.shape
    assert_close(a.grad, ar.grad, dtype, scale=8)
    assert_close(b.grad, br.grad, dtype, scale=8)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("with_bias", [True, False])
def test_npu_linear_forward_and_backward(dtype, with_bias):
    x0, w0, b0 = torch.randn(6, 8), torch.randn(5, 8), torch.randn(5)
    x, w = npu_leaf(x0, dtype), npu_leaf(w0, dtype)
    xr, wr = cpu_leaf(x0, dtype), cpu_leaf(w0, dtype)
    b = npu_leaf(b0, dtype) if with_bias else None
    br = cpu_leaf(b0, dtype) if with_bias else None
    out = torch_npu.npu_linear(x, w, b)
    ref = F.linear(xr, wr, br)
    assert_close(out, ref, dtype, scale=4)
    seed = torch.randn(6, 5)
    out.backward(seed.to(dtype).npu())
    ref.backward(seed.to(dtype).double())
    assert_close(x.grad, xr.grad, dtype, scale=8)
    assert_close(w.grad, wr.grad, dtype, scale=8)
    if with_bias:
        assert_close(b.grad, br.grad, dtype, scale=8)
    assert list(inspect.signature(torch_npu.npu_linear).parameters) == ["input_", "weight", "bias"]


@pytest.mark.parametrize("n", [16, 300])
def test_matmul_checksum_is_false_for_a_product_and_true_for_a_corrupted_one(n):
    for _ in range(3):
        a = torch.randn(n, n, dtype=torch.bfloat16, device="npu")
        b = torch.randn(n, n, dtype=torch.bfloat16, device="npu")
        c = torch.matmul(a, b)
        flag = torch_npu.matmul_checksum(a, b, c)
        assert flag.dtype == torch.bool and flag.dim() == 0 and flag.device.type == "npu"
        assert not bool(flag)
    corrupted = c.clone()
    corrupted[n // 2, 1] += c.abs().max()
    assert bool(torch_npu.matmul_checksum(a, b, corrupted))
    with pytest.raises(TypeError, match="a has dtype float32"):
        torch_npu.matmul_checksum(a.float(), b, c)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_softmax_cross_entropy_with_logits(dtype):
    x0 = torch.randn(6, 10) * 3
    labels = torch.softmax(torch.randn(6, 10), -1)
    x, xr = npu_leaf(x0, dtype), cpu_leaf(x0, dtype)
    lab = labels.to(dtype)
    out = torch_npu.npu_softmax_cross_entropy_with_logits(x, lab.npu())
    ref = -(lab.double() * torch.log_softmax(xr, -1)).sum(-1)
    assert out.shape == (6,)
    assert_close(out, ref, dtype, scale=4)
    seed = torch.randn(6)
    out.backward(seed.to(dtype).npu())
    ref.backward(seed.to(dtype).double())
    assert_close(x.grad, xr.grad, dtype, scale=4)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_dropout_with_add_softmax(dtype):
    torch.manual_seed(7)
    s0, x10 = torch.randn(2, 4, 8, 16), torch.randn(2, 4, 8, 16)
    x, x1 = npu_leaf(s0, dtype), npu_leaf(x10, dtype)
    mask, softmax, dropout = torch_npu.npu_dropout_with_add_softmax(x, x1, 0.5, 0.25, -1)
    assert mask.dtype == torch.uint8 and softmax.dtype == dropout.dtype == dtype
    keep = mask.float().mean().item()
    assert 0.65 < keep < 0.85  # 1 - prob
    sr, x1r = cpu_leaf(s0, dtype), cpu_leaf(x10, dtype)
    soft_ref = torch.softmax(x1r + 0.5 * sr, -1)
    drop_ref = soft_ref * mask.cpu().double() / 0.75
    assert_close(softmax, soft_ref, dtype, scale=2)
    assert_close(dropout, drop_ref, dtype, scale=2)
    seed = torch.randn(2, 4, 8, 16)
    dropout.backward(seed.to(dtype).npu())
    drop_ref.backward(seed.to(dtype).double())
    assert_close(x.grad, sr.grad, dtype, scale=4)
    assert_close(x1.grad, x1r.grad, dtype, scale=4)
    # reproducible under the npu generator's seed
    torch.manual_seed(7)
    again = torch_npu.npu_dropout_with_add_softmax(x.detach(), x1.detach(), 0.5, 0.25, -1)[0]
    assert torch.equal(again, mask)


def test_erase_stream_validates_and_reuse_is_immediate():
    stream = torch.npu.Stream()
    event = torch.npu.Event()
    t = torch.ones(1000, 1000, device="npu")
    ptr = t.data_ptr()
    t.record_stream(stream)
    event.record(torch.npu.current_stream())
    event.wait(stream)
    assert torch_npu.erase_stream(t, stream) is None
    del t
    assert torch.ones(1000, 1000, device="npu").data_ptr() == ptr
    with pytest.raises(TypeError, match="stream must be a torch.npu.Stream"):
        torch_npu.erase_stream(torch.ones(2, device="npu"), 3)
    with pytest.raises(ValueError, match="same npu device"):
        torch_npu.erase_stream(torch.ones(2), stream)


def test_argument_errors_and_opcheck():
    with pytest.raises(ValueError, match="cannot be multiplied"):
        torch_npu.npu_bmmV2(torch.randn(2, 3, 4, device="npu"), torch.randn(2, 5, 4, device="npu"), [])
    with pytest.raises(ValueError, match=r"bias must have shape \(5,\)"):
        torch_npu.npu_linear(torch.randn(2, 4, device="npu"), torch.randn(5, 4, device="npu"), torch.randn(4, device="npu"))
    with pytest.raises(ValueError, match="prob=1.0 must be in"):
        torch_npu.npu_dropout_with_add_softmax(torch.randn(1, 1, 2, 2, device="npu"), torch.randn(1, 1, 2, 2, device="npu"), 1, 1.0, -1)
    x = torch.randn(3, 4, 5, device="npu", requires_grad=True)
    opcheck(torch.ops.npu.npu_bmmV2.default, (x, torch.randn(3, 5, 2, device="npu"), []))
    opcheck(torch.ops.npu.npu_bmm_v2_mat1_backward.default, (torch.randn(3, 4, 2, device="npu"), x.detach(), torch.randn(3, 5, 2, device="npu"), [3, 4, 5]))
    opcheck(torch.ops.npu.npu_linear.default, (x[0].detach().requires_grad_(True), torch.randn(6, 5, device="npu"), torch.randn(6, device="npu")))
    opcheck(torch.ops.npu.npu_linear_backward.default, (torch.randn(4, 6, device="npu"), x[0].detach(), torch.randn(6, 5, device="npu")))
    opcheck(torch.ops.npu.npu_softmax_cross_entropy_with_logits.default, (x[0], torch.rand(4, 5, device="npu")))
    opcheck(torch.ops.npu.npu_dropout_with_add_softmax_backward.default, (torch.randn(1, 2, 3, 4, device="npu"), torch.ones(1, 2, 3, 4, dtype=torch.uint8, device="npu"), torch.rand(1, 2, 3, 4, device="npu"), 0.5, 0.1, -1))
    # random: schema and fake tensors only (AOT dispatch compares two random draws)
    torch.library.opcheck(torch.ops.npu.npu_dropout_with_add_softmax.default, (torch.randn(1, 2, 3, 4, device="npu"), torch.randn(1, 2, 3, 4, device="npu"), 0.5, 0.1, -1), test_utils=("test_schema", "test_faketensor"))
