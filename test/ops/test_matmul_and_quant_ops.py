"""npu_grouped_matmul, npu_dynamic_quant and npu_quant_matmul against plain-PyTorch cpu
references of the Ascend documentation's formulas, in each grouping and quantisation mode."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from fused_ops_compare import DTYPES, assert_close

import torch_npu

FLOAT_IDS = [str(d).split(".")[-1] for d in DTYPES]


def npu(*tensors):
    return [t.npu() for t in tensors]


# --- npu_grouped_matmul ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=FLOAT_IDS)
def test_grouped_matmul_separate_pairs_with_bias(dtype):
    xs = [torch.randn(4, 8), torch.randn(2, 3, 16), torch.randn(5, 4)]
    ws = [torch.randn(8, 6), torch.randn(16, 2), torch.randn(4, 3)]
    bs = [torch.randn(6), torch.randn(2), torch.randn(3)]
    outs = torch_npu.npu_grouped_matmul(
        npu(*(x.to(dtype) for x in xs)), npu(*(w.to(dtype) for w in ws)),
        bias=npu(*(b.to(dtype) for b in bs)), group_type=-1,
    )
    assert len(outs) == 3
    for out, x, w, b in zip(outs, xs, ws, bs):
        ref = x.to(dtype).double() @ w.to(dtype).double() + b.to(dtype).double()
        assert out.dtype == dtype
        assert_close(out, ref, dtype, scale=4)


@pytest.mark.parametrize("dtype", DTYPES, ids=FLOAT_IDS)
@pytest.mark.parametrize("split_item", [0, 3])
# group_list_type 2 ([group, size] rows) exists only for a Tensor group_list.
@pytest.mark.parametrize("group_list_type,as_list", [(0, False), (0, True), (1, False), (1, True), (2, False)])
def test_grouped_matmul_splits_x_rows_by_group_list(dtype, group_list_type, split_item, as_list):
    sizes = [3, 0, 4, 2]
    m, k, n = sum(sizes), 8, 5
    x = torch.randn(m, k).to(dtype)
    w = torch.randn(len(sizes), k, n).to(dtype)
    if group_list_type == 0:
        group_list = torch.tensor(sizes).cumsum(0)
    elif group_list_type == 1:
        group_list = torch.tensor(sizes)
    else:
        group_list = torch.tensor([[g, s] for g, s in enumerate(sizes)])
    group_list = group_list.tolist() if as_list else group_list.npu()
    outs = torch_npu.npu_grouped_matmul(
        [x.npu()], [w.npu()], group_list=group_list, split_item=split_item,
        group_type=0, group_list_type=group_list_type,
    )
    refs = [chunk.double() @ w[i].double() for i, chunk in enumerate(x.split(sizes))]
    if split_item == 3:
        assert len(outs) == 1
        assert_close(outs[0], torch.cat(refs), dtype, scale=4)
    else:
        assert [tuple(o.shape) for o in outs] == [(s, n) for s in sizes]
        for out, ref in zip(outs, refs):
            assert_close(out, ref, dtype, scale=4)


def test_grouped_matmul_several_weights_and_k_axis_groups():
    x = torch.randn(6, 8)
    ws = [torch.randn(8, 4) for _ in range(3)]
    (out,) = torch_npu.npu_grouped_matmul(
        [x.npu()], npu(*ws), group_list=[1, 4, 6], split_item=2, group_type=0
    )
    ref = torch.cat([x[0:1] @ ws[0], x[1:4] @ ws[1], x[4:6] @ ws[2]])
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
    # group_type=2: K is split; one (M, N) product per slice.
    a, b = torch.randn(3, 10), torch.randn(10, 4)
    (out,) = torch_npu.npu_grouped_matmul(
        [a.npu()], [b.npu()], group_list=torch.tensor([4, 10]).npu(), split_item=3, group_type=2
    )
    ref = torch.stack([a[:, :4] @ b[:4], a[:, 4:] @ b[4:]])
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("act_type,activation", [
    (1, F.relu),
    (2, lambda t: F.gelu(t, approximate="tanh")),
    (4, lambda t: t * torch.sigmoid(1.702 * t)),
    (5, F.silu),
])
def test_grouped_matmul_int8_per_token_quantised_with_activation(act_type, activation):
    x = torch.randint(-8, 8, (6, 16), dtype=torch.int8)
    w = torch.randint(-8, 8, (2, 16, 4), dtype=torch.int8)
    scale = torch.rand(2, 4) / 50
    per_token = torch.rand(6) + 0.5
    bias = torch.randint(-20, 20, (2, 4), dtype=torch.int32)
    (out,) = torch_npu.npu_grouped_matmul(
        [x.npu()], [w.npu()], bias=[bias.npu()], scale=[scale.npu()],
        per_token_scale=[per_token.npu()], group_list=torch.tensor([2, 6]).npu(),
        split_item=3, group_type=0, act_type=act_type, output_dtype=torch.bfloat16,
    )
    groups = [(0, 2), (2, 6)]
    refs = []
    for g, (lo, hi) in enumerate(groups):
        acc = x[lo:hi].double() @ w[g].double() + bias[g].double()
        refs.append(activation(acc * scale[g].double() * per_token[lo:hi].double().unsqueeze(-1)))
    assert out.dtype == torch.bfloat16
    assert_close(out, torch.cat(refs), torch.bfloat16)


def test_grouped_matmul_antiquant_int8_weight():
    x = torch.randn(4, 8).half()
    w = torch.randint(-100, 100, (8, 6), dtype=torch.int8)
    antiquant_scale, antiquant_offset = (torch.rand(6) / 50).half(), torch.randn(6).half()
    (out,) = torch_npu.npu_grouped_matmul(
        [x.npu()], [w.npu()], antiquant_scale=[antiquant_scale.npu()],
        antiquant_offset=[antiquant_offset.npu()], group_type=-1,
    )
    weight = ((w.double() + antiquant_offset.double()) * antiquant_scale.double()).half().double()
    assert_close(out, x.double() @ weight, torch.float16, scale=4)


# --- npu_dynamic_quant ---------------------------------------------------------------------

def quantise_reference(x, qmax):
    scale = x.abs().amax(dim=-1) / qmax
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.round(x / safe.unsqueeze(-1)).clamp(-qmax - 1, qmax), scale


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("smooth", ["none", "vector", "grouped"])
def test_dynamic_quant_int8(dtype, smooth):
    x = torch.randn(2, 5, 16).to(dtype)
    x[0, 1] = 0  # a row of zeros gets scale 0 and zeros
    kwargs, xs = {}, x.double()
    if smooth == "vector":
        s = (torch.rand(16) + 0.5).to(dtype)
        kwargs["smooth_scales"] = s.npu()
        xs = xs * s.double()
    elif smooth == "grouped":
        s = (torch.rand(3, 16) + 0.5).to(dtype)
        group_index = torch.tensor([4, 7, 10], dtype=torch.int32)
        kwargs.update(smooth_scales=s.npu(), group_index=group_index.npu())
        rows = xs.reshape(10, 16).clone()
        for g, (lo, hi) in enumerate([(0, 4), (4, 7), (7, 10)]):
            rows[lo:hi] *= s[g].double()
        xs = rows.reshape(2, 5, 16)
    y, scale = torch_npu.npu_dynamic_quant(x.npu(), **kwargs)
    y_ref, scale_ref = quantise_reference(xs.float(), 127)
    assert (y.dtype, scale.dtype, tuple(scale.shape)) == (torch.int8, torch.float32, (2, 5))
    torch.testing.assert_close(scale.cpu(), scale_ref, atol=1e-6, rtol=1e-6)
    # Rounding at exact halves may differ by one between float orders of operations.
    assert (y.cpu().int() - y_ref.int()).abs().max() <= 1
    assert (y.cpu().int() == y_ref.int()).float().mean() > 0.99
    assert torch.equal(y[0, 1].cpu(), torch.zeros(16, dtype=torch.int8))


def unpack_int4_reference(words):
    values = []
    for word in words.reshape(-1).tolist():
        u = word & 0xFFFFFFFF
        for i in range(8):
            nibble = (u >> (4 * i)) & 0xF
            values.append(nibble - 16 if nibble >= 8 else nibble)
    return torch.tensor(values).reshape(*words.shape[:-1], words.shape[-1] * 8)


def test_dynamic_quant_int4_packs_eight_values_per_int32():
    x = torch.randn(3, 16).half()
    y, scale = torch_npu.npu_dynamic_quant(x.npu(), dst_type=torch.quint4x2)
    assert (y.dtype, tuple(y.shape)) == (torch.int32, (3, 2))
    y_ref, scale_ref = quantise_reference(x.float(), 7)
    torch.testing.assert_close(scale.cpu(), scale_ref)
    assert torch.equal(unpack_int4_reference(y.cpu()), y_ref.long())


# --- npu_quant_matmul ----------------------------------------------------------------------

@pytest.mark.parametrize("case", ["int8_offset", "fp16_int32_bias", "bf16_pertoken_float_bias", "int32_out"])
def test_quant_matmul(case):
    x1 = torch.randint(-5, 5, (2, 8, 32), dtype=torch.int8)
    x2 = torch.randint(-5, 5, (32, 16), dtype=torch.int8)
    scale = torch.rand(16) / 10
    acc = x1.double() @ x2.double()
    if case == "int8_offset":
        offset = torch.randn(16)
        out = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu(), offset=offset.npu())
        ref = torch.round(acc * scale.double() + offset.double()).clamp(-128, 127)
        assert out.dtype == torch.int8
        assert (out.cpu().double() - ref).abs().max() <= 1
        return
    if case == "fp16_int32_bias":
        bias = torch.randint(-50, 50, (16,), dtype=torch.int32)
        out = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu(), bias=bias.npu(), output_dtype=torch.float16)
        ref = (acc + bias.double()) * scale.double()
        assert_close(out, ref, torch.float16, scale=4)
        return
    if case == "bf16_pertoken_float_bias":
        pertoken = torch.rand(8) + 0.5
        bias = torch.randn(16).bfloat16()
        out = torch_npu.npu_quant_matmul(
            x1.npu(), x2.npu(), scale.npu(), pertoken_scale=pertoken.npu(), bias=bias.npu(),
            output_dtype=torch.bfloat16,
        )
        ref = acc * scale.double() * pertoken.double().unsqueeze(-1) + bias.double()
        assert_close(out, ref, torch.bfloat16)
        return
    bias = torch.randint(-50, 50, (16,), dtype=torch.int32)
    out = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu(), bias=bias.npu(), output_dtype=torch.int32)
    assert out.dtype == torch.int32
    assert torch.equal(out.cpu().double(), acc + bias.double())


def test_quant_matmul_int4_packed_inputs():
    a = torch.randint(-8, 8, (4, 16))
    b = torch.randint(-8, 8, (16, 8))

    def pack(values):
        words = []
        for row in values.reshape(-1, 8).tolist():
            u = sum((v & 0xF) << (4 * i) for i, v in enumerate(row))
            words.append(u - 2**32 if u >= 2**31 else u)
        return torch.tensor(words, dtype=torch.int32).reshape(*values.shape[:-1], values.shape[-1] // 8)

    scale = torch.rand(8)
    out = torch_npu.npu_quant_matmul(pack(a).npu(), pack(b).npu(), scale.npu(), output_dtype=torch.float16)
    assert_close(out, (a.double() @ b.double()) * scale.double(), torch.float16, scale=4)
