"""cat has an unboxed npu kernel that runs ATen's structured CPU kernel over the npu
tensors when every tensor is a plain npu tensor of one device and nothing observes or
captures; every other call goes to the operator fallback. Either way the result is cpu's
bit for bit (values, dtype, strides, memory format), or cpu's error.
"""
import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)
from npu_runtime_compare import same_outcome

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
          torch.bool, torch.complex64]


def _fast_path_calls():
    return torch_npu._C._fast_path_counts().get("aten::cat", 0)


def _values(dtype, shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(shape, generator=gen) * 5
    return (a > 0) if dtype == torch.bool else a.to(dtype)


@pytest.mark.parametrize("dtype_a", DTYPES)
@pytest.mark.parametrize("dtype_b", DTYPES)
def test_every_dtype_pair_equals_cpu(dtype_a, dtype_b):
    a, b = _values(dtype_a, (3, 4)), _values(dtype_b, (3, 2), seed=1)
    before = _fast_path_calls()
    same_outcome(lambda: torch.cat([a, b], 1), lambda: torch.cat([a.npu(), b.npu()], 1))
    assert _fast_path_calls() == before + 1


def _cases():
    gen = torch.Generator().manual_seed(2)
    a, b = torch.randn(3, 4, generator=gen), torch.randn(3, 2, generator=gen)
    nchw = torch.randn(2, 3, 4, 5, generator=gen)
    return {
        "rows": ([a, a * 2, a * 3], 0),
        "negative_dim": ([a, b], -1),
        "transposed": ([a.t(), a.t() + 1], 0),
        "strided": ([a[:, ::2], b], 1),
        "expanded": ([a[:1].expand(3, 4), a], 1),
        "channels_last": ([nchw.contiguous(memory_format=torch.channels_last)] * 2, 1),
        "mixed_formats": ([nchw.contiguous(memory_format=torch.channels_last), nchw], 0),
        "legacy_empty": ([a, torch.empty(0), b], 1),
        "only_empty": ([torch.empty(0), torch.empty(0)], 0),
        "one_tensor": ([a], 0),
        "large": ([torch.randn(200, 300, generator=gen), torch.randn(100, 300, generator=gen)], 0),
        "empty_rows": ([a[:0], a[:0]], 0),
        "sizes_mismatch": ([a, b], 0),
        "zero_dim": ([torch.tensor(1.0), torch.tensor(2.0)], 0),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_layouts_and_errors_equal_cpu(case):
    tensors, dim = _cases()[case]
    same_outcome(lambda: torch.cat(tensors, dim), lambda: torch.cat([t.npu() for t in tensors], dim))


def test_dim_out_of_range_raises_as_on_cpu():
    a = torch.ones(3, 4)
    with pytest.raises(IndexError) as cpu_error:
        torch.cat([a, a], 5)
    with pytest.raises(IndexError) as npu_error:
        torch.cat([a.npu(), a.npu()], 5)
    assert str(npu_error.value) == str(cpu_error.value)


def test_lists_the_fast_path_does_not_serve(two_devices):
    d0, d1 = two_devices
    a = torch.arange(6.0).view(2, 3)
    before = _fast_path_calls()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.cat([a.to(d0), a.to(d1)])
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.cat([a.to(d0), a])
    out = torch.empty(0, device=d1)
    torch.cat([a.to(d1), a.to(d1)], out=out)  # cat.out: the fallback
    assert _fast_path_calls() == before
    torch.testing.assert_close(out.cpu(), torch.cat([a, a]), rtol=0, atol=0)
    torch.npu.set_device(d0)
    on_d1 = torch.cat([a.to(d1), a.to(d1)], 1)
    assert _fast_path_calls() == before + 1 and on_d1.device == d1
    torch.testing.assert_close(on_d1.cpu(), torch.cat([a, a], 1), rtol=0, atol=0)


def test_gradients_equal_cpu():
    a, b = _values(torch.float32, (3, 4)), _values(torch.float32, (3, 2), seed=1)
    grads = {}
    for device in ("cpu", "npu"):
        x = a.to(device).detach().requires_grad_()
        y = b.to(device).detach().requires_grad_()
        (torch.cat([x, y * 2, x.sin()], 1) ** 2).sum().backward()
        grads[device] = x.grad.cpu(), y.grad.cpu()
    for cpu_grad, npu_grad in zip(grads["cpu"], grads["npu"]):
        torch.testing.assert_close(npu_grad, cpu_grad, rtol=0, atol=0)


def test_observed_and_captured_calls_take_the_fallback():
    a = _values(torch.float32, (3, 4))
    x = a.npu()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        before = _fast_path_calls()
        y = torch.cat([x, x], 0)
        assert _fast_path_calls() == before
        torch.npu.synchronize()
    device_rows = {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1}
    assert any("cat" in n for n in device_rows), device_rows
    torch.testing.assert_close(y.cpu(), torch.cat([a, a], 0), rtol=0, atol=0)

    graph = torch.npu.NPUGraph()
    before = _fast_path_calls()
    with torch.npu.graph(graph):
        out = torch.cat([x, x * 2], 1)
    assert _fast_path_calls() == before
    graph.replay()
    torch.npu.synchronize()
    torch.testing.assert_close(out.cpu(), torch.cat([a, a * 2], 1), rtol=0, atol=0)
