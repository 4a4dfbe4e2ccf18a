"""The comparisons (eq, ne, lt, le, gt, ge), where, masked_fill_, logical_not, bitwise
and/or, maximum/minimum, and cos, sin, log, reciprocal, erf have unboxed npu kernels that
run the CPU kernel's loop over the npu tensors when nothing observes and nothing captures,
and hand every other call to the operator fallback. Either way the result is cpu's bit for
bit (values, dtype, strides), or cpu's error.
"""
import warnings

import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)
from npu_runtime_compare import same_outcome

COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
          torch.bool, torch.complex64]
NUMBERS = [3, -2.5, 0.1, True, 256, -1, 1 + 2j, float("nan"), torch.tensor(0.3, dtype=torch.float64),
           torch.tensor(7, dtype=torch.int32), torch.tensor(2.0, dtype=torch.float16)]
FLOAT_UNARY = [("cos", torch.cos, torch.cos_), ("sin", torch.sin, torch.sin_), ("log", torch.log, torch.log_),
               ("reciprocal", torch.reciprocal, torch.reciprocal_), ("erf", torch.erf, torch.erf_)]


def _fast_path_calls(name):
    """Calls the `name` fast path served so far (torch_npu._C._fast_path_counts)."""
    return torch_npu._C._fast_path_counts().get(name, 0)


def _values(dtype, shape=(3, 4), seed=0):
    """Values of `dtype` with repeats (so comparisons find equal elements); floats include
    NaN, ±inf and -0.0."""
    gen = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.randint(0, 4, shape, generator=gen).to(dtype)
    a = torch.randint(-2, 3, shape, generator=gen).to(dtype) / 2
    if a.numel() >= 4:
        a.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0]).to(dtype)
    return a


def _layouts():
    gen = torch.Generator().manual_seed(2)
    base = torch.randint(-2, 3, (2, 3, 4, 5), generator=gen).float()
    return {
        "transposed": (base.transpose(1, 3), base.transpose(1, 3).flip(0)),
        "channels_last": (base.contiguous(memory_format=torch.channels_last), base.flip(1)),
        "sliced": (base[:, ::2, 1:, ::3], base[:, ::2, 1:, ::3].flip(0)),
        "expanded": (base[:, :1].expand(2, 3, 4, 5), base),
        "broadcast_0dim": (base, torch.tensor(1.0)),
        "0dim_and_1_element": (torch.tensor(2.0), torch.ones(1)),
        "empty": (base[:, :0], base[:, :0]),
    }


# ---- comparisons ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", COMPARISONS)
@pytest.mark.parametrize("dtype_a", DTYPES)
@pytest.mark.parametrize("dtype_b", DTYPES)
def test_comparison_of_every_dtype_pair_equals_cpu(name, dtype_a, dtype_b):
    op = getattr(torch, name)
    a, b = _values(dtype_a), _values(dtype_b, (4,), seed=1)
    before = _fast_path_calls(f"aten::{name}.Tensor")
    same_outcome(lambda: op(a, b), lambda: op(a.npu(), b.npu()))
    assert _fast_path_calls(f"aten::{name}.Tensor") == before + 1


@pytest.mark.parametrize("name", COMPARISONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_comparison_with_a_number_or_cpu_value_equals_cpu(name, dtype):
    op = getattr(torch, name)
    for number in NUMBERS:
        a = _values(dtype)
        overload = "Tensor" if isinstance(number, torch.Tensor) else "Scalar"
        before = _fast_path_calls(f"aten::{name}.{overload}"), _fast_path_calls(f"aten::{name}_.{overload}")
        same_outcome(lambda: op(a, number), lambda: op(a.npu(), number))
        same_outcome(lambda: getattr(a.clone(), name + "_")(number), lambda: getattr(a.npu(), name + "_")(number))
        assert _fast_path_calls(f"aten::{name}.{overload}") == before[0] + 1
        assert _fast_path_calls(f"aten::{name}_.{overload}") == before[1] + 1


@pytest.mark.parametrize("name", COMPARISONS)
@pytest.mark.parametrize("dtype_a", [torch.float32, torch.int64, torch.bool, torch.float16])
@pytest.mark.parametrize("dtype_b", [torch.float32, torch.int64, torch.bool])
def test_in_place_comparison_equals_cpu(name, dtype_a, dtype_b):
    a, b = _values(dtype_a), _values(dtype_b, (4,), seed=1)
    same_outcome(lambda: getattr(a.clone(), name + "_")(b), lambda: getattr(a.npu(), name + "_")(b.npu()))


@pytest.mark.parametrize("name", COMPARISONS)
@pytest.mark.parametrize("layout", list(_layouts()))
def test_comparison_layouts_and_result_strides_equal_cpu(name, layout):
    op = getattr(torch, name)
    a, b = _layouts()[layout]
    same_outcome(lambda: op(a, b), lambda: op(a.npu(), b.npu()))
    same_outcome(lambda: op(a, 0.5), lambda: op(a.npu(), 0.5))


@pytest.mark.parametrize("name", COMPARISONS)
def test_in_place_comparison_on_views_as_on_cpu(name):
    for view_a, view_b in [
        (lambda t: t[:3], lambda t: t[3:]),         # disjoint views of one storage
        (lambda t: t[1:], lambda t: t[:-1]),        # partial overlap: cpu refuses it
        (lambda t: t[:1].expand(6), lambda t: t),   # a written tensor with internal overlap
        (lambda t: t.view(2, 3).t(), lambda t: t.view(2, 3).t()),  # the same elements
    ]:
        u = torch.tensor([1.0, 2.0, 2.0, 1.0, 3.0, 2.0, 0.0])
        v = u.npu()

        def on_cpu():
            getattr(view_a(u), name + "_")(view_b(u))
            return u

        def on_npu():
            getattr(view_a(v), name + "_")(view_b(v))
            return v

        same_outcome(on_cpu, on_npu)


def test_comparison_errors_are_cpu_errors():
    a = _values(torch.float32)
    for run in (lambda t: torch.lt(t, 1j), lambda t: torch.eq(t, t[:2, :2]),
                lambda t: t.bool().eq_(2.5), lambda t: t[:, :1].expand(3, 4).lt_(t.T[:4, :3].T)):
        same_outcome(lambda: run(a.clone()), lambda: run(a.npu()))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.eq(a.npu(), torch.ones(4))  # a cpu tensor that is not 0-dim


# ---- where, masked_fill --------------------------------------------------------------------

@pytest.mark.parametrize("dtype_a", DTYPES)
@pytest.mark.parametrize("dtype_b", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
def test_where_of_every_dtype_pair_equals_cpu(dtype_a, dtype_b):
    cond = _values(torch.bool, (3, 1), seed=3)
    a, b = _values(dtype_a), _values(dtype_b, (4,), seed=1)
    before = _fast_path_calls("aten::where.self")
    same_outcome(lambda: torch.where(cond, a, b), lambda: torch.where(cond.npu(), a.npu(), b.npu()))
    assert _fast_path_calls("aten::where.self") == before + 1


@pytest.mark.parametrize("layout", list(_layouts()))
def test_where_layouts_and_numbers_equal_cpu(layout):
    a, b = _layouts()[layout]
    cond = a > 0
    same_outcome(lambda: torch.where(cond, a, b), lambda: torch.where(cond.npu(), a.npu(), b.npu()))
    for number in (0.0, -7, True):  # where.ScalarOther / ScalarSelf: an npu 0-dim value
        same_outcome(lambda: torch.where(cond, a, number), lambda: torch.where(cond.npu(), a.npu(), number))
        same_outcome(lambda: torch.where(cond, number, b), lambda: torch.where(cond.npu(), number, b.npu()))


def test_where_out_and_errors_as_on_cpu():
    cond, a, b = _values(torch.bool, seed=3), _values(torch.float32), _values(torch.float32, seed=1)
    before = _fast_path_calls("aten::where.self_out")
    for out_dtype, out_shape in ((torch.float32, (3, 4)), (torch.float32, (0,)), (torch.int64, (3, 4))):
        out_cpu, out_npu = torch.empty(out_shape, dtype=out_dtype), torch.empty(out_shape, dtype=out_dtype).npu()
        same_outcome(lambda: torch.where(cond, a, b, out=out_cpu), lambda: torch.where(cond.npu(), a.npu(), b.npu(),
                                                                                       out=out_npu))
    assert _fast_path_calls("aten::where.self_out") == before + 3
    # A float condition, a uint8 condition (deprecated, warned), a cpu operand that is not 0-dim.
    same_outcome(lambda: torch.where(a, a, b), lambda: torch.where(a.npu(), a.npu(), b.npu()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_outcome(lambda: torch.where(cond.byte(), a, b), lambda: torch.where(cond.byte().npu(), a.npu(), b.npu()))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.where(cond.npu(), a.npu(), b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_fill_equals_cpu(dtype):
    a, mask = _values(dtype), _values(torch.bool, (4,), seed=3)
    for value in (2, -1.5, True, 0.1):
        before = _fast_path_calls("aten::masked_fill_.Scalar")
        same_outcome(lambda: a.clone().masked_fill_(mask, value), lambda: a.npu().masked_fill_(mask.npu(), value))
        same_outcome(lambda: a.masked_fill(mask, value), lambda: a.npu().masked_fill(mask.npu(), value))
        assert _fast_path_calls("aten::masked_fill_.Scalar") == before + 2
    value = torch.tensor(3, dtype=dtype)
    before = _fast_path_calls("aten::masked_fill_.Tensor")
    same_outcome(lambda: a.clone().masked_fill_(mask, value), lambda: a.npu().masked_fill_(mask.npu(), value.npu()))
    assert _fast_path_calls("aten::masked_fill_.Tensor") == before + 1


def test_masked_fill_layouts_views_and_errors_as_on_cpu():
    for layout, (a, b) in _layouts().items():
        mask = b > 0
        same_outcome(lambda: a.clone().masked_fill_(mask, 9.0), lambda: a.npu().clone().masked_fill_(mask.npu(), 9.0))
        same_outcome(lambda: a.masked_fill(mask, -9.0), lambda: a.npu().masked_fill(mask.npu(), -9.0))
    a = _values(torch.float32)
    mask = a > 0
    for run in (lambda t, m: t.masked_fill_(m.float(), 1.0),       # a mask that is not bool
                lambda t, m: t.masked_fill_(m, t[0]),                # a value that is not 0-dim
                lambda t, m: t.masked_fill_(m[:, :3], 1.0),          # shapes that do not broadcast
                lambda t, m: t.view(-1)[1:].masked_fill_(t.view(-1)[:-1].bool(), 1.0)):  # partial overlap
        same_outcome(lambda: run(a.clone(), mask), lambda: run(a.npu(), mask.npu()))
    # A written tensor with internal overlap: deprecated, warned, filled.
    u = torch.arange(4.0)
    with pytest.warns(UserWarning, match="expanded tensors"):
        same_outcome(lambda: u.clone()[:1].expand(4).masked_fill_(torch.tensor([True, False, True, False]), 5.0),
                     lambda: u.npu()[:1].expand(4).masked_fill_(torch.tensor([True, False, True, False]).npu(), 5.0))
    # A cpu value takes the fallback and its rule for cpu arguments.
    same_outcome(lambda: a.clone().masked_fill_(mask, torch.tensor(4.0)),
                 lambda: a.npu().masked_fill_(mask.npu(), torch.tensor(4.0)))


# ---- logical_not, bitwise and/or, maximum/minimum ------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_logical_not_equals_cpu(dtype):
    a = _values(dtype)
    before = _fast_path_calls("aten::logical_not"), _fast_path_calls("aten::logical_not_")
    same_outcome(lambda: torch.logical_not(a), lambda: torch.logical_not(a.npu()))
    same_outcome(lambda: a.clone().logical_not_(), lambda: a.npu().logical_not_())
    same_outcome(lambda: torch.logical_not(a.t()), lambda: torch.logical_not(a.npu().t()))
    assert _fast_path_calls("aten::logical_not") == before[0] + 2
    assert _fast_path_calls("aten::logical_not_") == before[1] + 1


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "maximum", "minimum"])
@pytest.mark.parametrize("dtype_a", DTYPES)
@pytest.mark.parametrize("dtype_b", [torch.int64, torch.bool, torch.uint8, torch.float32])
def test_bitwise_and_extrema_equal_cpu(name, dtype_a, dtype_b):
    op = getattr(torch, name)
    a, b = _values(dtype_a), _values(dtype_b, (4,), seed=1)
    same_outcome(lambda: op(a, b), lambda: op(a.npu(), b.npu()))
    if name.startswith("bitwise"):
        same_outcome(lambda: getattr(a.clone(), name + "_")(b), lambda: getattr(a.npu(), name + "_")(b.npu()))
        for number in (3, True, torch.tensor(5)):
            same_outcome(lambda: op(a, number), lambda: op(a.npu(), number))


# ---- float unary operators ----------------------------------------------------------------

@pytest.mark.parametrize("name,op,op_", FLOAT_UNARY)
@pytest.mark.parametrize("dtype", DTYPES)
def test_float_unary_equals_cpu(name, op, op_, dtype):
    a = _values(dtype, (4, 6))
    before = _fast_path_calls(f"aten::{name}")
    same_outcome(lambda: op(a), lambda: op(a.npu()))
    same_outcome(lambda: op_(a.clone()), lambda: op_(a.npu()))
    # Integer and bool inputs are promoted to float: a converting copy, the fallback's.
    served = dtype.is_floating_point or dtype.is_complex
    assert _fast_path_calls(f"aten::{name}") == before + served
    for x, _ in _layouts().values():  # float32
        same_outcome(lambda: op(x), lambda: op(x.npu()))


# ---- devices, gradients, observers, capture -------------------------------------------------

def test_npu1_results_live_on_npu1(two_devices):
    d0, d1 = two_devices
    torch.npu.set_device(d0)
    a = torch.randn(64, device=d1)
    torch.npu.synchronize(d1)
    before = torch.npu.memory_allocated(d0)
    for op in (lambda t: t > 0, lambda t: torch.where(t > 0, t, -t), lambda t: t.masked_fill(t < 0, 0.0),
               torch.cos, lambda t: torch.logical_not(t), lambda t: torch.maximum(t, t.flip(0))):
        out = op(a)
        assert out.device == d1 and torch.npu.current_device() == 0
        torch.testing.assert_close(out.cpu(), op(a.cpu()), rtol=0, atol=0)
    assert torch.npu.memory_allocated(d0) == before
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.where(a > 0, a, torch.ones(64, device=d0))


def test_gradients_equal_cpu():
    a = _values(torch.float32, (5, 7)).nan_to_num(0.5, 0.5, 0.5).abs() + 0.1
    b = torch.linspace(0.2, 3.0, 7)
    grads = {}
    for device in ("cpu", "npu"):
        x = a.to(device).detach().requires_grad_()
        y = b.to(device).detach().requires_grad_()
        z = (torch.where(x > y, x, y * 2) + torch.maximum(x, y) * torch.cos(x) + torch.log(x) * torch.sin(y)
             + torch.erf(x).masked_fill(x < 1.0, 0.0) + torch.reciprocal(y) + torch.minimum(x, y))
        z.sum().backward()
        grads[device] = z.detach().cpu(), x.grad.cpu(), y.grad.cpu()
    for cpu_value, npu_value in zip(grads["cpu"], grads["npu"]):
        torch.testing.assert_close(npu_value, cpu_value, rtol=0, atol=0)


def test_observed_and_captured_calls_take_the_fallback():
    a = _values(torch.float32)
    x = a.npu()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        before = torch_npu._C._fast_path_counts()
        y = torch.where(x > 0, x, torch.cos(x))
        assert torch_npu._C._fast_path_counts() == before
        torch.npu.synchronize()
    torch.testing.assert_close(y.cpu(), torch.where(a > 0, a, torch.cos(a)), rtol=0, atol=0, equal_nan=True)
    device_rows = {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1}
    assert any("where" in n for n in device_rows) and any("gt" in n for n in device_rows), device_rows

    graph = torch.npu.NPUGraph()
    before = torch_npu._C._fast_path_counts()
    with torch.npu.graph(graph):
        out = torch.where(x > 0, x, -1.0)
        x.masked_fill_(x < 0, 0.0)
    assert torch_npu._C._fast_path_counts() == before
    torch.npu.synchronize()
    torch.testing.assert_close(x.cpu(), a, rtol=0, atol=0, equal_nan=True)  # recorded, not run
    graph.replay()
    torch.npu.synchronize()
    torch.testing.assert_close(out.cpu(), torch.where(a > 0, a, -1.0), rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(x.cpu(), a.masked_fill(a < 0, 0.0), rtol=0, atol=0, equal_nan=True)


def test_conjugate_and_negative_views_as_on_cpu():
    # Views whose conj or neg bit a kernel must resolve first: the fallback's business.
    a = _values(torch.complex64)
    for view in (torch.conj, torch._neg_view):
        same_outcome(lambda: torch.eq(view(a), a), lambda: torch.eq(view(a.npu()), a.npu()))
        same_outcome(lambda: torch.cos(view(a)), lambda: torch.cos(view(a.npu())))
        same_outcome(lambda: torch.where(a.real > 0, view(a), a), lambda: torch.where(a.real.npu() > 0, view(a.npu()),
                                                                                       a.npu()))
