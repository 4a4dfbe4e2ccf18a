"""add, sub, mul and div have an unboxed npu kernel that calls the CPU kernel directly
when nothing observes and nothing captures, and hands every other call to the operator
fallback. Both paths must give cpu's results and cpu's (or CUDA's) errors; the profiler
must still show the npu work of these operators, and a capture must still record them.
"""
import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)

BINARY = [
    ("add", lambda a, b: torch.add(a, b, alpha=2)),
    ("sub", lambda a, b: torch.sub(a, b, alpha=3)),
    ("mul", torch.mul),
    ("div", torch.div),
]
IN_PLACE = [
    ("add_", lambda a, b: a.add_(b, alpha=2)),
    ("sub_", lambda a, b: a.sub_(b, alpha=3)),
    ("mul_", lambda a, b: a.mul_(b)),
    ("div_", lambda a, b: a.div_(b)),
]


def _fast_path_calls(name):
    """Calls the `name` fast path served so far (torch_npu._C._fast_path_counts)."""
    return torch_npu._C._fast_path_counts().get(name, 0)


def _operands(dtype_a=torch.float32, dtype_b=torch.float32):
    gen = torch.Generator().manual_seed(0)
    a = (torch.randn(3, 4, generator=gen) * 10).to(dtype_a)
    b = (torch.randn(4, generator=gen) * 10 + 20).to(dtype_b)  # broadcast, never zero
    return a, b


@pytest.mark.parametrize("name,op", BINARY)
@pytest.mark.parametrize("dtypes", [(torch.float32, torch.float32), (torch.int64, torch.float16),
                                    (torch.bfloat16, torch.bfloat16), (torch.complex64, torch.float32)])
def test_functional_equals_cpu(name, op, dtypes):
    a, b = _operands(*dtypes)
    expected = op(a, b)
    before = _fast_path_calls(f"aten::{name}.Tensor")
    got = op(a.npu(), b.npu())
    assert _fast_path_calls(f"aten::{name}.Tensor") == before + 1
    assert got.device.type == "npu" and got.dtype == expected.dtype
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize("name,op", BINARY)
def test_cpu_scalar_operand_equals_cpu(name, op):
    a, _ = _operands()
    for other in (torch.tensor(2.5), 3):  # a cpu 0-dim tensor, a Python number
        torch.testing.assert_close(op(a.npu(), other).cpu(), op(a, other), rtol=0, atol=0)


@pytest.mark.parametrize("name,op", IN_PLACE)
def test_in_place_equals_cpu(name, op):
    a, b = _operands()
    x = a.npu()
    before = _fast_path_calls(f"aten::{name}.Tensor")
    returned = op(x, b.npu())
    assert _fast_path_calls(f"aten::{name}.Tensor") == before + 1
    assert returned is x
    torch.testing.assert_close(x.cpu(), op(a.clone(), b), rtol=0, atol=0)


@pytest.mark.parametrize("name,op", IN_PLACE)
def test_in_place_on_itself_and_on_overlapping_views_as_on_cpu(name, op):
    x = torch.arange(1.0, 7.0)
    y = x.npu()
    op(y, y)
    torch.testing.assert_close(y.cpu(), op(x.clone(), x.clone()), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="unsupported operation") as cpu_error:
        u = torch.arange(1.0, 7.0)
        op(u[1:], u[:-1])
    with pytest.raises(RuntimeError) as npu_error:
        v = torch.arange(1.0, 7.0).npu()
        op(v[1:], v[:-1])
    assert str(npu_error.value).splitlines()[0] == str(cpu_error.value).splitlines()[0]


def test_errors_are_cpu_and_cuda_errors():
    a, b = _operands()
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        a.long().npu().add_(b.npu())
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.add(a.npu(), torch.ones(4))  # a cpu tensor that is not 0-dim


def test_tensors_of_two_devices_raise(two_devices):
    d0, d1 = two_devices
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mul(torch.ones(2, device=d0), torch.ones(2, device=d1))
    out = torch.mul(torch.ones(2, device=d1), 3)
    assert out.device == d1


def test_profiler_sees_the_npu_work():
    a, b = _operands()
    x, y = a.npu(), b.npu()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        before = _fast_path_calls("aten::mul.Tensor")
        z = torch.mul(x, y)
        assert _fast_path_calls("aten::mul.Tensor") == before  # the fallback announced it
        torch.npu.synchronize()
    torch.testing.assert_close(z.cpu(), a * b, rtol=0, atol=0)
    device_rows = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert any("mul" in e.name for e in device_rows), [e.name for e in prof.events()]


def test_capture_records_instead_of_running():
    a, b = _operands()
    x, y = a.npu(), b.npu()
    graph = torch.npu.NPUGraph()
    before = torch_npu._C._fast_path_counts()
    with torch.npu.graph(graph):
        out = torch.add(x, y, alpha=2)
        x.mul_(2)
    assert torch_npu._C._fast_path_counts() == before  # recorded by the fallback
    torch.npu.synchronize()
    torch.testing.assert_close(x.cpu(), a, rtol=0, atol=0)  # recorded, not run
    graph.replay()
    torch.npu.synchronize()
    torch.testing.assert_close(out.cpu(), torch.add(a, b, alpha=2), rtol=0, atol=0)
    torch.testing.assert_close(x.cpu(), a * 2, rtol=0, atol=0)
