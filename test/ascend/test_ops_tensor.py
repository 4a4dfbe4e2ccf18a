"""The layout and indexing operators (npu_pad, npu_slice, npu_transpose, npu_indexing,
npu_stride_add, npu_one_hot, npu_scatter_nd_update, npu_max, npu_sign_bits_pack/unpack)
against plain PyTorch / NumPy references on cpu, Ascend's documented examples, the argument
errors and opcheck."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from npu_ops_compare import opcheck

import torch_npu


def test_npu_pad_against_reference_and_example():
    x = torch.randn(2, 3, 4)
    out = torch_npu.npu_pad(x.npu(), [1, 0, 0, 2, 3, 1])
    assert torch.equal(out.cpu(), F.pad(x, [3, 1, 0, 2, 1, 0]))
    example = torch_npu.npu_pad(torch.tensor([[20, 20, 10, 10]], dtype=torch.float16).npu(), [1, 1, 1, 1])
    assert torch.equal(example.cpu(), F.pad(torch.tensor([[20, 20, 10, 10]], dtype=torch.float16), [1, 1, 1, 1]))


def test_npu_slice_against_reference():
    x = torch.arange(1, 61, dtype=torch.float16).reshape(3, 4, 5)
    out = torch_npu.npu_slice(x.npu(), [1, 0, 2], [2, -1, 3])
    assert out.is_contiguous() and torch.equal(out.cpu(), x[1:3, 0:, 2:5])


def test_npu_transpose_and_out():
    x = torch.randn(2, 3, 5)
    out = torch_npu.npu_transpose(x.npu(), (2, 0, 1))
    assert out.is_contiguous() and torch.equal(out.cpu(), x.permute(2, 0, 1))
    buffer = torch.empty(0, device="npu")
    result = torch_npu.npu_transpose(x.npu(), [1, 2, 0], out=buffer)
    assert result is buffer and torch.equal(buffer.cpu(), x.permute(1, 2, 0))


def numpy_strided_slice(array, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0):
    index = []
    for i in range(len(begin)):
        if (ellipsis_mask >> i) & 1:
            index.append(Ellipsis)
        elif (new_axis_mask >> i) & 1:
            index.append(None)
        elif (shrink_axis_mask >> i) & 1:
            index.append(begin[i])
        else:
            index.append(slice(None if (begin_mask >> i) & 1 else begin[i], None if (end_mask >> i) & 1 else end[i], strides[i]))
    return array[tuple(index)]


STRIDED_CASES = [
    ([0, 0], [2, 2], [1, 1], {}),
    ([1, -1, 0], [3, 0, 5], [1, -2, 2], {}),
    ([0, 0, 0], [0, 0, 0], [1, 1, 1], {"begin_mask": 0b111, "end_mask": 0b111}),
    ([0, 1], [0, 3], [1, 1], {"ellipsis_mask": 0b01}),
    ([2, 0, 1], [3, 0, 4], [1, 1, 1], {"shrink_axis_mask": 0b001, "new_axis_mask": 0b010}),
    ([-1, 4], [-4, 0], [-1, -1], {}),
]


@pytest.mark.parametrize("begin,end,strides,masks", STRIDED_CASES)
def test_npu_indexing_against_numpy(begin, end, strides, masks):
    x = torch.arange(4 * 5 * 6, dtype=torch.int32).reshape(4, 5, 6)
    out = torch_npu.npu_indexing(x.npu(), begin, end, strides, **masks)
    expected = torch.from_numpy(np.ascontiguousarray(numpy_strided_slice(x.numpy(), begin, end, strides, **masks)))
    assert tuple(out.shape) == tuple(expected.shape)
    assert torch.equal(out.cpu(), expected)


def test_npu_stride_add():
    a, b = torch.randn(2, 40, 3, 3), torch.randn(2, 20, 3, 3)
    out = torch_npu.npu_stride_add(a.npu(), b.npu(), 1, 0, 2)
    assert out.shape == (2, 32, 3, 3)
    expected = F.pad(a[:, 16:40], [0, 0, 0, 0, 0, 8]) + F.pad(b[:, 0:20], [0, 0, 0, 0, 0, 12])
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_npu_one_hot_against_reference(axis):
    x = torch.tensor([[5, 3, 2], [1, 0, -1]], dtype=torch.int32)
    out = torch_npu.npu_one_hot(x.npu(), num_classes=axis, depth=5, on_value=2.5, off_value=-1)
    inside = (x >= 0) & (x < 5)
    ref = F.one_hot(x.clamp(0, 4).long(), 5).bool() & inside.unsqueeze(-1)
    ref = torch.where(ref, 2.5, -1.0).movedim(-1, axis)
    assert out.dtype == torch.float32 and torch.equal(out.cpu(), ref)


def test_npu_scatter_nd_update():
    x = torch.randn(4, 5, 6)
    indices = torch.tensor([[0, 1], [3, 4], [2, 0]], dtype=torch.int32)
    updates = torch.randn(3, 6)
    out = torch_npu.npu_scatter_nd_update(x.npu(), indices.npu(), updates.npu())
    ref = x.clone()
    for row, (i, j) in enumerate(indices.tolist()):
        ref[i, j] = updates[row]
    assert torch.equal(out.cpu(), ref)
    assert torch.equal(x, x.npu().cpu())  # self unchanged


@pytest.mark.parametrize("keepdim", [False, True])
def test_npu_max_forward_and_backward(keepdim):
    x0 = torch.randn(3, 4, 5)
    x = x0.npu().requires_grad_(True)
    values, indices = torch_npu.npu_max(x, 1, keepdim)
    ref_values, ref_indices = torch.max(x0.double().requires_grad_(True), 1, keepdim)
    assert indices.dtype == torch.int32
    assert torch.equal(values.detach().cpu().double(), ref_values.detach()) and torch.equal(indices.cpu().long(), ref_indices)
    seed = torch.randn(ref_values.shape)
    values.backward(seed.npu())
    xr = x0.double().requires_grad_(True)
    torch.max(xr, 1, keepdim)[0].backward(seed.double())
    assert torch.equal(x.grad.cpu().double(), xr.grad)


def numpy_sign_pack(x, size):
    bits = np.packbits(np.sign(x) + 1 > 0, bitorder="little")
    return bits.reshape(size, bits.shape[0] // size)


def test_sign_bits_pack_and_unpack_against_numpy():
    x = torch.randn(37)
    packed = torch_npu.npu_sign_bits_pack(x.npu(), 5)
    assert packed.dtype == torch.uint8
    assert np.array_equal(packed.cpu().numpy(), numpy_sign_pack(x.numpy(), 5))
    unpacked = torch_npu.npu_sign_bits_unpack(packed.reshape(-1), 2, torch.float16)
    ref = (np.unpackbits(packed.cpu().numpy().reshape(-1), bitorder="little").astype(np.float16) - 0.5) * 2
    assert unpacked.dtype == torch.float16 and np.array_equal(unpacked.cpu().numpy(), ref.reshape(2, -1))
    # Ascend's documented example
    example = torch.tensor([5, 4, 3, 2, 0, -1, -2, 4, 3, 2, 1, 0, -1, -2], dtype=torch.float32)
    assert np.array_equal(torch_npu.npu_sign_bits_pack(example.npu(), 2).cpu().numpy(), numpy_sign_pack(example.numpy(), 2))


def test_argument_errors():
    x = torch.randn(2, 3, device="npu")
    with pytest.raises(ValueError, match="paddings must hold two values"):
        torch_npu.npu_pad(x, [1, 1])
    with pytest.raises(IndexError, match=r"offsets\[1\]=2 with size\[1\]=3"):
        torch_npu.npu_slice(x, [0, 2], [1, 3])
    with pytest.raises(ValueError, match="not a permutation"):
        torch_npu.npu_transpose(x, [0, 0])
    with pytest.raises(ValueError, match=r"strides\[0\] is 0"):
        torch_npu.npu_indexing(x, [0], [1], [0])
    with pytest.raises(ValueError, match=r"updates must have shape \(1, 3\)"):
        torch_npu.npu_scatter_nd_update(x, torch.tensor([[0]], device="npu"), torch.ones(2, 3, device="npu"))
    with pytest.raises(ValueError, match="size=3 must be positive and divide"):
        torch_npu.npu_sign_bits_pack(torch.randn(16, device="npu"), 3)
    with pytest.raises(IndexError, match="dim=2"):
        torch_npu.npu_max(x, 2)


def test_opcheck():
    x = torch.randn(3, 4, 5, device="npu")
    opcheck(torch.ops.npu.npu_pad.default, (x, [1, 0, 0, 2, 1, 1]))
    opcheck(torch.ops.npu.npu_slice.default, (x, [0, 1, 1], [2, 2, -1]))
    opcheck(torch.ops.npu.npu_transpose.default, (x, [2, 0, 1], True))
    opcheck(torch.ops.npu.npu_indexing.default, (x, [0, -1, 0], [3, 0, 5], [2, -1, 1], 0, 0, 0, 0, 0))
    opcheck(torch.ops.npu.npu_stride_add.default, (torch.randn(1, 20, 2, 2, device="npu"), torch.randn(1, 20, 2, 2, device="npu"), 0, 1, 1))
    opcheck(torch.ops.npu.npu_one_hot.default, (torch.tensor([1, 3, 0], device="npu"), -1, 4, 1, 0))
    opcheck(torch.ops.npu.npu_scatter_nd_update.default, (x, torch.tensor([[1], [2]], device="npu"), torch.randn(2, 4, 5, device="npu")))
    opcheck(torch.ops.npu.npu_max.dim, (x.requires_grad_(True), 1, False))
    opcheck(torch.ops.npu.npu_max_backward.default, (torch.randn(3, 5, device="npu"), 1, torch.zeros(3, 5, dtype=torch.int32, device="npu"), [3, 4, 5], False))
    opcheck(torch.ops.npu.npu_sign_bits_pack.default, (torch.randn(16, device="npu"), 2))
    opcheck(torch.ops.npu.npu_sign_bits_unpack.default, (torch.randint(0, 255, (4,), dtype=torch.uint8, device="npu"), 2, torch.float32))


def test_compiled_layout_ops_equal_eager(fresh_compiled_state):
    x = torch.randn(4, 6, 8, device="npu")

    def fn(t):
        return torch_npu.npu_transpose(torch_npu.npu_pad(t, [0, 0, 1, 1, 0, 0]), [2, 0, 1]) * 2

    out = torch.compile(fn, backend="inductor", fullgraph=True)(x)
    assert torch.equal(out, fn(x))


def test_npu_format_cast_accepts_customize_dtype():
    import inspect

    x = torch.randn(4, 16, device="npu")
    out = torch_npu.npu_format_cast(x, 29, customize_dtype=torch.float16)
    assert torch_npu.get_npu_format(out) == 29 and torch.equal(out.cpu(), x.cpu())
    assert list(inspect.signature(torch_npu.npu_format_cast).parameters) == ["self", "acl_format", "customize_dtype"]
    with pytest.raises(TypeError, match="customize_dtype must be a torch.dtype"):
        torch_npu.npu_format_cast(x, 29, customize_dtype="fp16")
