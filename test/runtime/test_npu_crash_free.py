"""Ops that used to kill the process (conjugate/negative views, efficient zero tensors,
complex results) give the cpu results; an op the runtime cannot run raises naming it."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from parameterized import parameterized

from npu_runtime_compare import assert_same, seeded_generator


def _complex(name: str, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.complex64, generator=seeded_generator(name))


def _real(name: str, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=seeded_generator(name)).to(dtype)


@parameterized.expand(
    [
        ("conj", lambda x: x.conj()),
        ("conj_then_op", lambda x: x.conj() * 2),
        ("H", lambda x: x.H),
        ("mH", lambda x: x.mH),
        ("conj_physical", torch.conj_physical),
        ("neg_view", lambda x: torch._neg_view(x)),
        ("conj_matmul", lambda x: x.conj() @ x.mT),
        ("svdvals", torch.linalg.svdvals),
        ("pinv", torch.linalg.pinv),
        ("abs_of_svd_u", lambda x: torch.linalg.svd(x).U.abs()),
    ]
)
def test_complex_views_and_results(name, fn):
    x = _complex(name, 3, 4)
    assert_same(fn(x.npu()), fn(x), rtol=1e-4, atol=1e-5)


def test_copy_into_conjugate_view():
    x = _complex("copy_into_conj", 2, 3)
    dst = torch.zeros(2, 3, dtype=torch.complex64, device="npu")
    dst.conj().copy_(x.npu())
    torch.testing.assert_close(dst.cpu(), x.conj())


@parameterized.expand(
    [(f.__name__, f, dtype) for f in (torch.fft.ifft, torch.fft.hfft, torch.fft.hfft2, torch.fft.hfftn,
                                      torch.fft.ihfft, torch.fft.ihfftn)
     for dtype in (torch.float32, torch.int64, torch.bool)]
)
def test_fft_of_real_inputs(_name, fn, dtype):
    x = _real("fft", 4, 6, dtype=dtype) if dtype != torch.bool else _real("fft", 4, 6) > 0
    assert_same(fn(x.npu()), fn(x), rtol=1e-4, atol=1e-5)


def test_sgn_backward_is_an_efficient_zero_gradient():
    x = _real("sgn", 5)
    xn = x.npu().requires_grad_()
    torch.sgn(xn).sum().backward()
    assert xn.grad.device.type == "npu"
    torch.testing.assert_close(xn.grad.cpu(), torch.zeros(5))


def test_efficient_zero_tensor_on_npu_reads_as_zeros():
    z = torch._efficientzerotensor((2, 3), device="npu")
    assert z._is_zerotensor() and z.device.type == "npu"
    torch.testing.assert_close((z + 1).cpu(), torch.ones(2, 3))
    torch.testing.assert_close(z.cpu(), torch.zeros(2, 3))


def test_as_strided_of_partial_view_reads_the_same_storage():
    base = torch.arange(20.0)
    base_npu = base.npu()
    for offset in (None, 0, 10):
        kwargs = {} if offset is None else {"storage_offset": offset}
        got = base_npu[5:15].as_strided((2, 2), (1, 2), **kwargs)
        torch.testing.assert_close(got.cpu(), base[5:15].as_strided((2, 2), (1, 2), **kwargs))


@parameterized.expand([("bfloat16", torch.bfloat16), ("float16", torch.float16)])
def test_group_and_layer_norm_in_reduced_precision_run_the_cpu_kernel(_name, dtype):
    x = _real("norm", 2, 6, 5, dtype=dtype)
    w, b = _real("w", 6, dtype=dtype), _real("b", 6, dtype=dtype)
    # Bitwise: npu runs the very CPU kernel, not the generic composite.
    assert torch.equal(F.group_norm(x.npu(), 3, w.npu(), b.npu()).cpu(), F.group_norm(x, 3, w, b))
    assert torch.equal(torch.native_group_norm(x.npu(), w.npu(), b.npu(), 2, 6, 5, 3, 1e-5)[0].cpu(),
                       torch.native_group_norm(x, w, b, 2, 6, 5, 3, 1e-5)[0])
    assert torch.equal(F.layer_norm(x.npu(), (5,)).cpu(), F.layer_norm(x, (5,)))


def test_op_without_cpu_kernel_raises_naming_it():
    x = torch.ones(4, device="npu")
    with pytest.raises(NotImplementedError, match=r"aten::_cudnn_rnn_flatten_weight is not supported on npu.*CPU kernel"):
        torch.ops.aten._cudnn_rnn_flatten_weight([x], 1, 4, 1, 1, 1, 1, False, False)
    assert (x + 1).sum().item() == 8  # still usable
