"""fill_, zero_ and copy_ between npu tensors of one device have unboxed npu kernels (the
writes behind zeros, scalar_tensor, clone and `to(dtype)`): fill_ and zero_ run cpu's
kernels on the npu memory with cpu's choices for host memory, copy_ runs cpu's copy on CPU
aliases. Calls the fast paths may not serve take the path they took before. Either way the
result is cpu's bit for bit (values, dtype, strides), or cpu's error.
"""
import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)
from npu_runtime_compare import same_outcome

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8,
          torch.uint8, torch.bool, torch.complex64, torch.complex128, torch.uint16, torch.float8_e4m3fn]
VALUES = [3, -2.5, 0.1, True, 1 + 2j, float("nan"), float("-inf"), 300, -1, 2 ** 40, 1e300, 2 ** 63 - 1, -2 ** 63]


def _fast_path_calls(name):
    """Calls the `name` fast path served so far (torch_npu._C._fast_path_counts)."""
    return torch_npu._C._fast_path_counts().get(name, 0)


def _values(dtype, shape=(3, 4), seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(shape, generator=gen) * 50
    if a.numel() >= 4:
        a.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), -0.0, 70000.0])
    if dtype == torch.bool:
        return a > 0
    if dtype.is_complex:
        return torch.complex(a, a.flip(-1)).to(dtype)
    if not dtype.is_floating_point:
        return a.nan_to_num(1.0, 5.0, -5.0).clamp(-100, 100).to(torch.int64).to(dtype)
    return a.to(dtype)


def _views():
    """name -> function of a fresh (4, 6) tensor giving the tensor to write."""
    return {
        "contiguous": lambda t: t,
        "one_element": lambda t: t[1:2, 2:3],
        "0dim": lambda t: t[1, 2],
        "transposed": lambda t: t.t(),
        "sliced": lambda t: t[:, ::2],
        "expanded": lambda t: t[:1, :1].expand(4, 6),  # internal overlap
        "empty": lambda t: t[:, :0],
    }


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_equals_cpu(dtype):
    for view in _views().values():
        for value in VALUES:
            a = _values(dtype, (4, 6))
            b = a.npu()

            def on_cpu():
                view(a).fill_(value)
                return a

            def on_npu():
                view(b).fill_(value)
                return b

            same_outcome(on_cpu, on_npu)


def test_fill_and_zero_take_the_fast_path():
    x = torch.ones(4, 6).npu()
    before = {n: _fast_path_calls(n) for n in ("aten::fill_.Scalar", "aten::fill_.Tensor", "aten::zero_")}
    x.fill_(2.5)
    x[0].fill_(x[1, 1])
    x[1].zero_()
    torch.zeros(3, device="npu")  # empty, then zero_
    assert _fast_path_calls("aten::fill_.Scalar") == before["aten::fill_.Scalar"] + 1
    assert _fast_path_calls("aten::fill_.Tensor") == before["aten::fill_.Tensor"] + 1
    assert _fast_path_calls("aten::zero_") == before["aten::zero_"] + 2
    expected = torch.full((4, 6), 2.5)
    expected[1] = 0
    torch.testing.assert_close(x.cpu(), expected, rtol=0, atol=0)


def test_fill_with_a_tensor_value_as_on_cpu():
    a = _values(torch.float32, (4, 6))
    for run in (lambda t, v: t.fill_(v),                 # a 0-dim value of the same device
                lambda t, v: t.fill_(t[2, 3]),            # a value that aliases self
                lambda t, v: t[1:].fill_(t[0, 0]),
                lambda t, v: t.fill_(t[0]),               # not 0-dim: cpu's error
                lambda t, v: t.int().fill_(v)):           # converted to self's dtype
        same_outcome(lambda: run(a.clone(), torch.tensor(-1.75)), lambda: run(a.npu(), torch.tensor(-1.75).npu()))
    # A cpu value takes the fallback and its rule for cpu arguments.
    same_outcome(lambda: a.clone().fill_(torch.tensor(4.0)), lambda: a.npu().fill_(torch.tensor(4.0)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 6), (300, 300)])  # below and above the memset size
def test_zero_equals_cpu(dtype, shape):
    for name, view in _views().items():
        a = _values(dtype, shape)
        b = a.npu()

        def on_cpu():
            view(a).zero_()
            return a

        def on_npu():
            view(b).zero_()
            return b

        same_outcome(on_cpu, on_npu)
    same_outcome(lambda: torch.zeros(shape, dtype=dtype), lambda: torch.zeros(shape, dtype=dtype, device="npu"))


@pytest.mark.parametrize("dtype_dst", DTYPES)
@pytest.mark.parametrize("dtype_src", DTYPES)
def test_copy_of_every_dtype_pair_equals_cpu(dtype_dst, dtype_src):
    src = _values(dtype_src, (4, 6), seed=1)
    before = _fast_path_calls("aten::copy_")
    same_outcome(lambda: torch.empty(4, 6, dtype=dtype_dst).copy_(src),
                 lambda: torch.empty(4, 6, dtype=dtype_dst, device="npu").copy_(src.npu()))
    assert _fast_path_calls("aten::copy_") == before + 1
    same_outcome(lambda: src.to(dtype_dst), lambda: src.npu().to(dtype_dst))


def test_copy_layouts_equal_cpu():
    gen = torch.Generator().manual_seed(3)
    base = torch.randn(64, 48, generator=gen)
    cases = [
        (lambda d: torch.empty(48, 64, device=d), lambda b: b.t()),                   # cpu's transposed-matrix copy
        (lambda d: torch.empty(64, 48, dtype=torch.float16, device=d), lambda b: b),  # cpu's float -> half path
        (lambda d: torch.empty(64, 48, device=d), lambda b: b.half()),                # and half -> float
        (lambda d: torch.empty(64, 48, device=d), lambda b: b[0]),                    # broadcast source
        (lambda d: torch.empty(2, 3, 4, 5, device=d).contiguous(memory_format=torch.channels_last),
         lambda b: b.view(-1)[:120].view(2, 3, 4, 5)),
        (lambda d: torch.empty(64, 48, device=d)[:, ::2], lambda b: b[:, 1::2]),
        (lambda d: torch.empty(64, 48, device=d), lambda b: b[:, :5]),                # shapes that do not broadcast
        (lambda d: torch.empty(64, 48, device=d)[:1].expand(64, 48), lambda b: b),    # dst with internal overlap
    ]
    for make_dst, view in cases:
        same_outcome(lambda: make_dst("cpu").copy_(view(base)), lambda: make_dst("npu").copy_(view(base.npu())))
    for _, view in cases[:3]:
        same_outcome(lambda: view(base).clone(), lambda: view(base.npu()).clone())


def test_copy_between_views_of_one_storage_as_on_cpu():
    for dst, src in [
        (lambda t: t[:3], lambda t: t[3:6]),     # disjoint
        (lambda t: t[1:], lambda t: t[:-1]),     # partial overlap: cpu refuses it
        (lambda t: t, lambda t: t),              # the same tensor: nothing to do
        (lambda t: t[2:5], lambda t: t[2:5]),    # the same elements, another view
        (lambda t: t.view(2, 4).t(), lambda t: t.view(4, 2)),
    ]:
        u = torch.arange(8.0)
        v = u.npu()

        def on_cpu():
            dst(u).copy_(src(u))
            return u

        def on_npu():
            dst(v).copy_(src(v))
            return v

        same_outcome(on_cpu, on_npu)


def test_copy_of_conjugate_and_negative_views_as_on_cpu():
    a = _values(torch.complex64)
    for view in (torch.conj, torch._neg_view):
        same_outcome(lambda: torch.empty_like(a).copy_(view(a)), lambda: torch.empty_like(a).npu().copy_(view(a.npu())))
        same_outcome(lambda: view(a).clone().resolve_conj().resolve_neg(),
                     lambda: view(a.npu()).clone().resolve_conj().resolve_neg())
    same_outcome(lambda: torch.empty(3, 4).copy_(a), lambda: torch.empty(3, 4).npu().copy_(a.npu()))  # warns


def test_copies_the_fast_path_does_not_serve_still_work(two_devices):
    d0, d1 = two_devices
    a = _values(torch.float32)
    before = _fast_path_calls("aten::copy_")
    x = a.to(d0)                        # host -> npu
    y = torch.empty(3, 4, device=d1).copy_(x)   # between two devices
    z = y.cpu()                         # npu -> host
    assert _fast_path_calls("aten::copy_") == before
    torch.testing.assert_close(z, a, rtol=0, atol=0, equal_nan=True)
    w = torch.empty(3, 4, dtype=torch.float64, device=d1).copy_(y)  # on npu:1 itself
    assert _fast_path_calls("aten::copy_") == before + 1 and w.device == d1
    torch.testing.assert_close(w.cpu(), a.double(), rtol=0, atol=0, equal_nan=True)


def test_observed_and_captured_calls_take_the_fallback():
    a = _values(torch.float32)
    x = a.npu()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        before = torch_npu._C._fast_path_counts()
        y = x.clone()
        y.fill_(1.0)
        z = x.double()
        assert torch_npu._C._fast_path_counts() == before
        torch.npu.synchronize()
    device_rows = {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1}
    assert any("Memcpy DtoD" in n for n in device_rows) and any("fill" in n for n in device_rows), device_rows
    torch.testing.assert_close(z.cpu(), a.double(), rtol=0, atol=0, equal_nan=True)

    graph = torch.npu.NPUGraph()
    out = torch.empty(3, 4, dtype=torch.float64, device="npu")
    before = torch_npu._C._fast_path_counts()
    with torch.npu.graph(graph):
        out.copy_(x)
        x.zero_()
    assert torch_npu._C._fast_path_counts() == before
    torch.npu.synchronize()
    torch.testing.assert_close(x.cpu(), a, rtol=0, atol=0, equal_nan=True)  # recorded, not run
    graph.replay()
    torch.npu.synchronize()
    torch.testing.assert_close(out.cpu(), a.double(), rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(x.cpu(), torch.zeros(3, 4), rtol=0, atol=0)


def test_gradients_through_copies_equal_cpu():
    a = _values(torch.float32, (5, 7)).nan_to_num(0.5, 0.5, 0.5)
    grads = {}
    for device in ("cpu", "npu"):
        x = a.to(device).detach().requires_grad_()
        y = x.double().clone() * 2
        z = torch.zeros(5, 7, dtype=torch.float64, device=device)
        z.copy_(y)
        (z.float().sin() + x.masked_fill(x > 0, 0.0)).sum().backward()
        grads[device] = x.grad.cpu()
    torch.testing.assert_close(grads["npu"], grads["cpu"], rtol=0, atol=0)
