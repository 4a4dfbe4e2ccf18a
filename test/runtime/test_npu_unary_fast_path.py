"""exp, neg, rsqrt, sigmoid, silu, sqrt, tanh and pow(Tensor, Scalar) have unboxed npu
kernels that run ATen's structured CPU kernel over the npu tensors when nothing observes
and nothing captures; float operators on integer or bool inputs, and every other call, go
to the operator fallback. Either way the result is cpu's bit for bit, or cpu's error.
"""
import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401  (registers the npu device)
from npu_runtime_compare import same_outcome

# (fast-path counter name, functional, in place)
UNARY = [
    ("exp", torch.exp, torch.exp_),
    ("neg", torch.neg, torch.neg_),
    ("rsqrt", torch.rsqrt, torch.rsqrt_),
    ("sigmoid", torch.sigmoid, torch.sigmoid_),
    ("silu", F.silu, lambda t: F.silu(t, inplace=True)),
    ("sqrt", torch.sqrt, torch.sqrt_),
    ("tanh", torch.tanh, torch.tanh_),
]
EXPONENTS = [2, 3, 0.5, -1, -2.0, 0, 1, 1.5, True]
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTEGERS = [torch.int64, torch.int32, torch.uint8, torch.bool]


def _fast_path_calls(name):
    """Calls the `name` fast path served so far (torch_npu._C._fast_path_counts)."""
    return torch_npu._C._fast_path_counts().get(name, 0)


def _values(dtype, shape=(4, 6), seed=0):
    """Values of `dtype`; floats include NaN, ±inf, -0.0, 0 and negatives."""
    gen = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.randint(0, 9, shape, generator=gen).to(dtype)
    a = (torch.randn(shape, generator=gen) * 3).to(dtype)
    a.view(-1)[:6] = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0, 0.0, -1.0]).to(dtype)
    return a


@pytest.mark.parametrize("name,op,op_", UNARY)
@pytest.mark.parametrize("dtype", FLOATS)
def test_float_dtypes_equal_cpu_on_the_fast_path(name, op, op_, dtype):
    a = _values(dtype)
    before = _fast_path_calls(f"aten::{name}"), _fast_path_calls(f"aten::{name}_")
    same_outcome(lambda: op(a), lambda: op(a.npu()))
    same_outcome(lambda: op_(a.clone()), lambda: op_(a.npu()))
    assert _fast_path_calls(f"aten::{name}") == before[0] + 1
    assert _fast_path_calls(f"aten::{name}_") == before[1] + 1


@pytest.mark.parametrize("name,op,op_", UNARY)
@pytest.mark.parametrize("dtype", INTEGERS + [torch.complex64])
def test_integer_bool_and_complex_inputs_as_on_cpu(name, op, op_, dtype):
    # Float operators promote integers (the fallback's result), neg refuses bool and silu
    # integers: cpu's results and cpu's errors.
    a = _values(dtype)
    same_outcome(lambda: op(a), lambda: op(a.npu()))
    same_outcome(lambda: op_(a.clone()), lambda: op_(a.npu()))


def _layouts():
    gen = torch.Generator().manual_seed(2)
    base = torch.randn(2, 3, 4, 5, generator=gen)
    return {
        "transposed": base.transpose(1, 3),
        "channels_last": base.contiguous(memory_format=torch.channels_last),
        "sliced": base[:, ::2, 1:, ::3],
        "0dim": torch.tensor(-0.75),
        "empty": base[:, :0],
    }


@pytest.mark.parametrize("name,op,op_", UNARY)
@pytest.mark.parametrize("layout", list(_layouts()))
def test_layouts_and_result_strides_equal_cpu(name, op, op_, layout):
    a = _layouts()[layout]
    same_outcome(lambda: op(a), lambda: op(a.npu()))
    same_outcome(lambda: op_(a.clone().transpose(0, -1)), lambda: op_(a.npu().clone().transpose(0, -1)))


@pytest.mark.parametrize("name,op,op_", UNARY)
def test_in_place_on_views_as_on_cpu(name, op, op_):
    for view in [lambda t: t[1::2], lambda t: t.view(3, 4).t(), lambda t: t[:1].expand(6)]:  # the last overlaps
        u = torch.linspace(-2.0, 3.0, 12)
        v = u.npu()

        def on_cpu():
            op_(view(u))
            return u

        def on_npu():
            op_(view(v))
            return v

        same_outcome(on_cpu, on_npu)


@pytest.mark.parametrize("dtype", FLOATS + INTEGERS + [torch.complex64])
@pytest.mark.parametrize("exponent", EXPONENTS)
def test_pow_tensor_scalar_equals_cpu(dtype, exponent):
    a = _values(dtype)
    before = _fast_path_calls("aten::pow.Tensor_Scalar"), _fast_path_calls("aten::pow_.Scalar")
    same_outcome(lambda: torch.pow(a, exponent), lambda: torch.pow(a.npu(), exponent))
    same_outcome(lambda: a.clone().pow_(exponent), lambda: a.npu().pow_(exponent))
    assert _fast_path_calls("aten::pow.Tensor_Scalar") == before[0] + 1
    assert _fast_path_calls("aten::pow_.Scalar") == before[1] + 1


@pytest.mark.parametrize("layout", list(_layouts()))
def test_pow_layouts_equal_cpu(layout):
    a = _layouts()[layout]
    for exponent in (2, 0.5, 1, 0):
        same_outcome(lambda: a ** exponent, lambda: a.npu() ** exponent)


def test_gpt2_gelu_composition_equals_cpu():
    # GPT-2's tanh-approximated gelu, as its MLP computes it.
    def gelu(x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))

    a = _values(torch.float32, (8, 16))
    before = _fast_path_calls("aten::tanh"), _fast_path_calls("aten::pow.Tensor_Scalar")
    same_outcome(lambda: gelu(a), lambda: gelu(a.npu()))
    assert _fast_path_calls("aten::tanh") == before[0] + 1
    assert _fast_path_calls("aten::pow.Tensor_Scalar") == before[1] + 1


def test_gradients_equal_cpu():
    a = _values(torch.float32, (5, 7)).nan_to_num(0.5, 0.5, 0.5).abs() + 0.1
    grads = {}
    for device in ("cpu", "npu"):
        x = a.to(device).detach().requires_grad_()
        y = (torch.tanh(x) + F.silu(x) * torch.rsqrt(x) - torch.exp(-x) + torch.sigmoid(x) * torch.sqrt(x)
             + torch.pow(x, 3) - x.neg())
        y.sum().backward()
        grads[device] = y.detach().cpu(), x.grad.cpu()
    for cpu_value, npu_value in zip(grads["cpu"], grads["npu"]):
        torch.testing.assert_close(npu_value, cpu_value, rtol=0, atol=0)


def test_npu1_results_live_on_npu1(two_devices):
    d0, d1 = two_devices
    torch.npu.set_device(d0)
    a = torch.randn(256, device=d1)
    torch.npu.synchronize(d1)
    before = torch.npu.memory_allocated(d0)
    for op in (torch.tanh, F.silu, torch.rsqrt, lambda t: t ** 2):
        out = op(a)
        assert out.device == d1 and torch.npu.current_device() == 0
        torch.testing.assert_close(out.cpu(), op(a.cpu()), rtol=0, atol=0, equal_nan=True)
    a.sigmoid_()
    assert torch.npu.memory_allocated(d0) == before


def test_observed_and_captured_calls_take_the_fallback():
    a = _values(torch.float32)
    x = a.npu()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        before = _fast_path_calls("aten::tanh")
        y = torch.tanh(x)
        assert _fast_path_calls("aten::tanh") == before
        torch.npu.synchronize()
    torch.testing.assert_close(y.cpu(), torch.tanh(a), rtol=0, atol=0, equal_nan=True)
    device_rows = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert any("tanh" in e.name for e in device_rows), [e.name for e in prof.events()]

    graph = torch.npu.NPUGraph()
    before = torch_npu._C._fast_path_counts()
    with torch.npu.graph(graph):
        out = F.silu(x)
        x.pow_(2)
    assert torch_npu._C._fast_path_counts() == before
    torch.npu.synchronize()
    torch.testing.assert_close(x.cpu(), a, rtol=0, atol=0, equal_nan=True)  # recorded, not run
    graph.replay()
    torch.npu.synchronize()
    torch.testing.assert_close(out.cpu(), F.silu(a), rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(x.cpu(), a ** 2, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name,op,op_", UNARY)
def test_conjugate_and_negative_views_as_on_cpu(name, op, op_):
    # Views whose conj or neg bit a kernel must resolve first: the fallback's business.
    a = _values(torch.complex64)
    for view in (torch.conj, torch._neg_view, lambda t: t.conj().imag):
        same_outcome(lambda: op(view(a)), lambda: op(view(a.npu())))
        same_outcome(lambda: view(a.clone()).pow(2), lambda: view(a.npu()).pow(2))
