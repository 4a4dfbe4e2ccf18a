"""torch.fft on float16 and complex32 npu tensors follows cuFFT's half-precision rules.

CUDA transforms half-precision signals whose transformed sizes are all powers of two (each
transform computed in float32, its result stored in half precision) and raises cuFFT's
error for any other size; cpu has no half-precision FFT at all. The reference here is cpu
in float32, narrowed to CUDA's result dtype (bit-equal for one transform), and cuFFT's
error text.
"""
from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401

NPU = torch.device("npu", 0)
CUFFT_ERROR = "cuFFT only supports dimensions whose sizes are powers of two when computing in half precision"


def _narrow(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.complex32 if t.is_complex() else torch.float16)


def _half(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).half()


def _bits_equal(got: torch.Tensor, want: torch.Tensor):
    assert got.device.type == "npu" and got.dtype == want.dtype, (got.dtype, want.dtype)
    torch.testing.assert_close(got.cpu(), want, atol=0, rtol=0)


# One transform each: cuFFT's result is cpu's float32 result rounded once.
SINGLE_TRANSFORMS = [
    (torch.fft.fft, {}), (torch.fft.ifft, {"norm": "ortho"}), (torch.fft.rfft, {"n": 16}),
    (torch.fft.irfft, {"n": 16}), (torch.fft.hfft, {"n": 8}), (torch.fft.ihfft, {"norm": "forward"}),
    (torch.fft.fft2, {}), (torch.fft.ifftn, {"s": (4, 16)}), (torch.fft.rfft2, {}), (torch.fft.rfftn, {"dim": (0,)}),
    (torch.fft.irfft2, {"s": (4, 8)}), (torch.fft.irfftn, {"s": (2, 4)}),
]


@pytest.mark.parametrize("fn,kwargs", SINGLE_TRANSFORMS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_float16_transform_is_cpu_float32_narrowed(fn, kwargs):
    x = _half(4, 8)
    got = fn(x.to(NPU), **kwargs)
    _bits_equal(got, _narrow(fn(x.float(), **kwargs)))


def test_complex32_transform_is_cpu_complex64_narrowed():
    x = torch.complex(_half(4, 8), _half(4, 8, seed=1)).to(torch.complex32)
    for fn, kwargs in ((torch.fft.fft, {}), (torch.fft.ifft2, {}), (torch.fft.irfft, {"n": 16}), (torch.fft.hfft, {"n": 8})):
        _bits_equal(fn(x.to(NPU), **kwargs), _narrow(fn(x.to(torch.complex64), **kwargs)))


def test_two_transforms_round_between_them_as_cufft():
    # ihfft2 of a real input is r2c over the last dim, then c2c: CUDA stores the first
    # result in complex32 before the second transform reads it.
    x = _half(8, 16)
    first = _narrow(torch.fft.ihfft(x.float())).to(torch.complex64)
    want = _narrow(torch.fft.ifft(first, dim=0))
    _bits_equal(torch.fft.ihfft2(x.to(NPU)), want)


@pytest.mark.parametrize("call", [
    lambda x: torch.fft.fft(x, n=6),
    lambda x: torch.fft.rfft2(x[:, :6]),
    lambda x: torch.fft.irfft(x[0, :4]),  # a signal of 2 * (4 - 1) = 6
    lambda x: torch.fft.hfftn(x, s=(4, 12)),
    lambda x: torch.fft.fftn(x.to(torch.complex32 if x.dtype == torch.float16 else torch.complex64)[:3]),
    lambda x: torch.ops.aten._fft_r2c(x[:, :5], [1], 0, True),
], ids=["fft_n6", "rfft2_6", "irfft_6", "hfftn_12", "fftn_complex32_3", "_fft_r2c_5"])
def test_sizes_that_are_not_powers_of_two_raise_cufft_error(call):
    x = _half(4, 8).to(NPU)
    with pytest.raises(RuntimeError, match=CUFFT_ERROR):
        call(x)
    call(x.float())  # float32 has no such rule


def test_error_names_the_signal_sizes():
    with pytest.raises(RuntimeError, match=r"signal size of\[4, 6\]"):
        torch.fft.fft2(_half(4, 6).to(NPU))


def test_gradient_flows_in_float32_and_returns_float16():
    x = _half(4, 8)
    leaf = x.to(NPU).requires_grad_()
    y = torch.fft.rfft2(leaf)
    assert y.dtype == torch.complex32
    g = torch.complex(_half(4, 5, seed=2), _half(4, 5, seed=3))
    (grad,) = torch.autograd.grad(y, leaf, g.to(torch.complex32).to(NPU))
    ref = x.float().requires_grad_()
    (want,) = torch.autograd.grad(torch.fft.rfft2(ref), ref, g)
    _bits_equal(grad, want.half())


def test_out_variant_writes_cuda_dtype():
    x = _half(8)
    out = torch.empty(0, dtype=torch.complex32, device=NPU)
    got = torch.fft.fft(x.to(NPU), out=out)
    assert got is out
    _bits_equal(out, _narrow(torch.fft.fft(x.float())))


def test_float32_and_complex64_are_unchanged():
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(4))
    for fn in (torch.fft.fft, torch.fft.rfft2, torch.fft.hfftn, torch.fft.ihfft):
        _bits_equal(fn(x.to(NPU)), fn(x))
    leaf = x.to(NPU).requires_grad_()
    torch.fft.fftn(leaf).abs().sum().backward()
    ref = x.clone().requires_grad_()
    torch.fft.fftn(ref).abs().sum().backward()
    _bits_equal(leaf.grad, ref.grad)


def test_float16_transform_in_npu_graph_replays_cufft_rounding():
    x = _half(4, 8).to(NPU)
    torch.fft.hfft2(x, s=(4, 8))  # warm-up, as on CUDA
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        y = torch.fft.hfft2(x, s=(4, 8))
    fresh = _half(4, 8, seed=7)
    x.copy_(fresh.to(NPU))
    graph.replay()
    _bits_equal(y, torch.fft.hfft2(fresh.to(NPU), s=(4, 8)).cpu())
