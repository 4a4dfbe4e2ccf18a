"""add, sub, mul, div and relu have an unboxed npu kernel that runs the CPU kernel's loop
over the npu tensors directly when nothing observes and nothing captures, and hands every
other call to the operator fallback. Both paths must give cpu's results and cpu's (or
CUDA's) errors; the profiler must still show the npu work of these operators, and a
capture must still record them.
"""
import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)
from npu_runtime_compare import same_outcome

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


# ---- the iterator over npu memory: every dtype, scalar, layout and device case ----------

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
          torch.bool, torch.complex64]
SCALARS = [3, -2.5, 0.1, True, 1 + 2j, torch.tensor(0.3, dtype=torch.float64), torch.tensor(7, dtype=torch.int32),
           torch.tensor(2.0, dtype=torch.float16)]


def _values(dtype, shape=(3, 4), seed=0):
    gen = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.randint(1, 9, shape, generator=gen).to(dtype)  # never zero: integer division
    return (torch.randn(shape, generator=gen) * 3).to(dtype)


@pytest.mark.parametrize("name,op", BINARY)
@pytest.mark.parametrize("dtype_a", DTYPES)
@pytest.mark.parametrize("dtype_b", DTYPES)
def test_every_dtype_pair_equals_cpu(name, op, dtype_a, dtype_b):
    a, b = _values(dtype_a), _values(dtype_b, (4,), seed=1)
    same_outcome(lambda: op(a, b), lambda: op(a.npu(), b.npu()))


@pytest.mark.parametrize("name,op", BINARY + IN_PLACE)
@pytest.mark.parametrize("dtype", DTYPES)
def test_cpu_value_of_every_kind_equals_cpu(name, op, dtype):
    # A Python number becomes a cpu 0-dim wrapped number, a 0-dim tensor stays one; for
    # float16 and bfloat16 mul and div read its value before any conversion.
    for scalar in SCALARS:
        a = _values(dtype)
        x = a.npu()
        same_outcome(lambda: op(a.clone(), scalar), lambda: op(x, scalar))


def _layouts():
    gen = torch.Generator().manual_seed(2)
    base = torch.randn(2, 3, 4, 5, generator=gen)
    return {
        "transposed": (base.transpose(1, 3), base.transpose(1, 3)),
        "channels_last": (base.contiguous(memory_format=torch.channels_last), base + 1),
        "sliced": (base[:, ::2, 1:, ::3], base[:, ::2, 1:, ::3].flip(0)),
        "expanded": (base[:, :1].expand(2, 3, 4, 5), base),
        "broadcast_0dim": (base, torch.tensor(1.5)),
        "0dim_and_1_element": (torch.tensor(2.0), torch.ones(1)),
        "empty": (base[:, :0], base[:, :0]),
    }


@pytest.mark.parametrize("name,op", BINARY)
@pytest.mark.parametrize("layout", list(_layouts()))
def test_layout_and_result_strides_equal_cpu(name, op, layout):
    a, b = _layouts()[layout]
    same_outcome(lambda: op(a, b), lambda: op(a.npu(), b.npu()))


@pytest.mark.parametrize("name,op", IN_PLACE)
def test_in_place_on_views_as_on_cpu(name, op):
    for view_a, view_b in [
        (lambda t: t[:3], lambda t: t[3:]),         # disjoint views of one storage
        (lambda t: t[::2], lambda t: t[1::2]),      # interleaved views, no common element
        (lambda t: t[:1].expand(6), lambda t: t),   # a written tensor with internal overlap
        (lambda t: t.view(2, 3).t(), lambda t: t.view(2, 3).t()),  # the same elements, transposed
    ]:
        u = torch.arange(1.0, 7.0)
        v = u.npu()

        def on_cpu():
            op(view_a(u), view_b(u))
            return u

        def on_npu():
            op(view_a(v), view_b(v))
            return v

        same_outcome(on_cpu, on_npu)


def test_npu1_results_live_on_npu1(two_devices):
    d0, d1 = two_devices
    torch.npu.set_device(d0)
    a = torch.randn(256, device=d1)
    b = torch.randn(256, device=d1)
    torch.npu.synchronize(d1)
    before = torch.npu.memory_allocated(d0), torch.npu.memory_allocated(d1)
    out = a + b
    assert out.device == d1 and torch.npu.current_device() == 0
    assert torch.npu.memory_allocated(d0) == before[0]
    assert torch.npu.memory_allocated(d1) > before[1]
    torch.testing.assert_close(out.cpu(), a.cpu() + b.cpu(), rtol=0, atol=0)
    a.mul_(torch.tensor(2.0))
    assert a.device == d1


def test_gradients_equal_cpu():
    a, b = _operands()
    grads = {}
    for device in ("cpu", "npu"):
        x = a.to(device).detach().requires_grad_()
        y = b.to(device).detach().requires_grad_()
        (torch.add(x, y, alpha=2) * torch.sub(x, y) / (y + 1)).sum().backward()
        grads[device] = x.grad.cpu(), y.grad.cpu()
    for cpu_grad, npu_grad in zip(grads["cpu"], grads["npu"]):
        torch.testing.assert_close(npu_grad, cpu_grad, rtol=0, atol=0)


# ---- relu: clamp_min(self, 0) on the npu tensor ----------------------------------------

RELU = [("relu", torch.relu), ("relu_", torch.relu_)]


@pytest.mark.parametrize("name,op", RELU)
@pytest.mark.parametrize("dtype", DTYPES)
def test_relu_equals_cpu(name, op, dtype):
    a = _values(dtype)
    if dtype.is_floating_point:
        a[0, :3] = torch.tensor([float("nan"), -0.0, float("-inf")])
    before = _fast_path_calls(f"aten::{name}")
    same_outcome(lambda: op(a.clone()), lambda: op(a.npu()))
    assert _fast_path_calls(f"aten::{name}") == before + 1


@pytest.mark.parametrize("layout", list(_layouts()))
def test_relu_layouts_equal_cpu(layout):
    a, _ = _layouts()[layout]
    same_outcome(lambda: torch.relu(a), lambda: torch.relu(a.npu()))
    same_outcome(lambda: torch.relu_(a.clone().t()), lambda: torch.relu_(a.npu().clone().t()))


def test_relu_in_place_on_an_overlapping_view_raises_as_on_cpu():
    with pytest.raises(RuntimeError) as cpu_error:
        torch.relu_(torch.arange(-3.0, 3.0)[:1].expand(4))
    with pytest.raises(RuntimeError) as npu_error:
        torch.relu_(torch.arange(-3.0, 3.0).npu()[:1].expand(4))
    assert str(npu_error.value).splitlines()[0] == str(cpu_error.value).splitlines()[0]


def test_relu_on_npu1_and_its_gradient(two_devices):
    _, d1 = two_devices
    a = _values(torch.float32)
    x = a.to(d1).requires_grad_()
    y = torch.relu(x)
    assert y.device == d1
    y.sum().backward()
    ref = a.clone().requires_grad_()
    torch.relu(ref).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), ref.grad, rtol=0, atol=0)
