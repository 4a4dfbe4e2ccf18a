"""The storage-level ``torch.ops.npu`` operators of Ascend's ATen schema (format-aware
empties, in-place and tensor-targeted format casts, copy_memory_, get_storage_size,
npu_change_data_ptr) against cpu results on the same inputs, and their argument errors."""
from __future__ import annotations

import pytest
import torch

import torch_npu
from npu_ops_compare import opcheck

FRACTAL_NZ, NC1HWC0, ND = 29, 3, 2


@pytest.mark.parametrize("op", ["empty_with_format", "unsafe_empty_with_format"])
def test_empty_with_format_records_the_format(op):
    out = getattr(torch.ops.npu, op)([2, 3], dtype=torch.float16, device="npu", acl_format=FRACTAL_NZ)
    assert out.device.type == "npu" and out.dtype == torch.float16 and out.shape == (2, 3)
    assert torch_npu.get_npu_format(out) == FRACTAL_NZ
    assert torch_npu.get_npu_format(getattr(torch.ops.npu, op)([4], device="npu")) == ND
    meta = getattr(torch.ops.npu, op)([5, 7], dtype=torch.bfloat16, device="meta")
    assert meta.device.type == "meta" and meta.shape == (5, 7) and meta.dtype == torch.bfloat16


def test_empty_with_format_names_and_swapped_memory():
    named = torch.ops.npu.empty_with_format.names([2, 3], ["a", "b"], device="npu", acl_format=NC1HWC0)
    assert named.shape == (2, 3) and torch_npu.get_npu_format(named) == NC1HWC0
    swapped = torch.ops.npu.empty_with_swapped_memory([6], dtype=torch.int32, device="npu")
    assert swapped.device.type == "npu" and swapped.dtype == torch.int32 and swapped.shape == (6,)
    swapped.fill_(3)
    assert torch.equal(swapped.cpu(), torch.full((6,), 3, dtype=torch.int32))


def test_empty_with_format_bad_arguments():
    with pytest.raises(ValueError, match="unknown ACL format"):
        torch.ops.npu.empty_with_format([2], device="npu", acl_format=1234)
    with pytest.raises(ValueError, match="negative"):
        torch.ops.npu.empty_with_format([-1, 2], device="npu")
    with pytest.raises(ValueError, match="2 dimensions"):
        torch.ops.npu.empty_with_format.names([2, 3], ["a"], device="npu")


def test_inplace_format_casts_keep_values_and_record_format():
    x = torch.randn(4, 6)
    npu = x.npu()
    assert torch.ops.npu.npu_format_cast_.acl_format(npu, FRACTAL_NZ) is npu
    assert torch_npu.get_npu_format(npu) == FRACTAL_NZ and torch.equal(npu.cpu(), x)
    other = torch.randn(3).npu()
    assert torch.ops.npu.npu_format_cast_(other, npu) is other
    assert torch_npu.get_npu_format(other) == FRACTAL_NZ
    with pytest.raises(ValueError, match="unknown ACL format"):
        torch.ops.npu.npu_format_cast_.acl_format(npu, 99)
    with pytest.raises(NotImplementedError, match="'CPU' backend"):  # as on Ascend: no cpu kernel
        torch.ops.npu.npu_format_cast_.acl_format(x, FRACTAL_NZ)


def test_out_of_place_format_casts():
    x = torch.randn(4, 6)
    target = torch_npu.npu_format_cast(torch.empty(1, device="npu"), NC1HWC0)
    cast = torch.ops.npu.npu_format_cast.Tensor(x.npu(), target)
    assert torch_npu.get_npu_format(cast) == NC1HWC0 and torch.equal(cast.cpu(), x)
    for result in (
        torch.ops.npu._npu_format_cast(x.npu(), FRACTAL_NZ),
        torch.ops.npu._npu_format_cast.aclnn(x.npu(), FRACTAL_NZ, 1),
        torch.ops.npu._npu_format_cast.input_dtype(x.npu(), FRACTAL_NZ, 1, 0),
    ):
        assert torch_npu.get_npu_format(result) == FRACTAL_NZ and torch.equal(result.cpu(), x)
    source = x.npu()
    torch.ops.npu._npu_format_cast(source, FRACTAL_NZ)
    assert torch_npu.get_npu_format(source) == ND  # out of place: the input keeps its format


def test_copy_memory_matches_cpu_copy():
    src = torch.randn(3, 4)
    dst = torch.zeros(3, 4)
    expected = dst.clone().copy_(src)
    npu_dst = dst.npu()
    assert torch.ops.npu.copy_memory_(npu_dst, src.npu()) is npu_dst
    assert torch.equal(npu_dst.cpu(), expected)
    with pytest.raises(RuntimeError, match="dtype"):
        torch.ops.npu.copy_memory_(npu_dst, src.double().npu())
    with pytest.raises(RuntimeError, match="elements"):
        torch.ops.npu.copy_memory_(npu_dst, torch.randn(5).npu())


def test_get_storage_size_is_the_storage_element_count():
    base = torch.randn(5, 8)
    for view in (base, base[1:, :3], base.t(), base[2]):
        npu_base = base.npu()
        npu_view = npu_base.as_strided(view.shape, view.stride(), view.storage_offset())
        expected = view.untyped_storage().nbytes() // view.element_size()
        assert torch.ops.npu.get_storage_size(npu_view) == expected == 40
    assert torch.ops.npu.get_storage_size(torch.empty(3, dtype=torch.float16, device="npu")) == 3


def test_npu_change_data_ptr_points_dst_at_src_offset():
    src_cpu = torch.arange(12.0)
    src = src_cpu.npu()
    dst = torch.empty(2, 2, device="npu")
    assert torch.ops.npu.npu_change_data_ptr(dst, src, 3) == 0
    assert dst.data_ptr() == src.data_ptr() + 3 * src.element_size()
    assert torch.equal(dst.cpu(), src_cpu[3:7].reshape(2, 2))
    src.add_(100)  # dst shares src's memory now
    assert torch.equal(dst.cpu(), (src_cpu + 100)[3:7].reshape(2, 2))
    with pytest.raises(RuntimeError, match="storage"):
        torch.ops.npu.npu_change_data_ptr(torch.empty(4, device="npu"), src, 10)
    with pytest.raises(RuntimeError, match="must match"):
        torch.ops.npu.npu_change_data_ptr(torch.empty(2, dtype=torch.float16, device="npu"), src, 0)
    with pytest.raises(ValueError, match="index"):
        torch.ops.npu.npu_change_data_ptr(torch.empty(2, device="npu"), src, -1)


def test_opcheck_schema_fake_and_aot():
    x = torch.randn(4, 6, device="npu")
    target = torch_npu.npu_format_cast(torch.empty(1, device="npu"), FRACTAL_NZ)
    opcheck(torch.ops.npu.npu_format_cast.Tensor, (x, target))
    opcheck(torch.ops.npu._npu_format_cast.default, (x, FRACTAL_NZ))
    opcheck(torch.ops.npu._npu_format_cast.aclnn, (x, FRACTAL_NZ, 1))
    opcheck(torch.ops.npu._npu_format_cast.input_dtype, (x, FRACTAL_NZ, 1, 0))
    # An empty's values are whatever the memory held, so eager and traced outputs differ by design.
    torch.library.opcheck(torch.ops.npu.empty_with_format.default, ([2, 3],), {"device": "npu", "acl_format": FRACTAL_NZ},
                          test_utils=("test_schema", "test_faketensor"))
    # Ascend's in-place schemas return their aliased input (Tensor(a!)), which AOT autograd
    # cannot functionalize for a custom operator: schema and fake-tensor checks only.
    for op, args in ((torch.ops.npu.npu_format_cast_.acl_format, (x.clone(), FRACTAL_NZ)),
                     (torch.ops.npu.npu_format_cast_.default, (x.clone(), target)),
                     (torch.ops.npu.copy_memory_.default, (torch.empty(4, 6, device="npu"), x))):
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))
