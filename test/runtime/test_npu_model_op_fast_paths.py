"""Layer norm, softmax/log-softmax, gelu, index_select, embedding's backward, sum/mean over
dims and the backward kernels transformer training runs have unboxed npu kernels that run
the CPU implementation when nothing observes or captures (on the npu tensors themselves
where it cannot tell them from cpu tensors, else on CPU aliases), and hand every other call
to the operator fallback (docs/runtime.md).

Each case runs forward and backward on npu and on cpu from the same values (sliced and
transposed inputs keep their strides on npu) and compares every result and gradient bit for
bit, strides included; ``torch_npu._C._fast_path_counts()``
shows the fast path served the npu calls, and stood aside while the profiler watched.
"""
import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401  (registers the npu device)


def _counts():
    return dict(torch_npu._C._fast_path_counts())


def _rand(*shape, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed + 7 * len(shape) + sum(shape))
    return torch.randn(shape, generator=gen).to(dtype)


def _assert_bits(npu_result, cpu_result):
    assert npu_result.device.type == "npu"
    assert npu_result.dtype == cpu_result.dtype and npu_result.shape == cpu_result.shape
    assert npu_result.stride() == cpu_result.stride()
    torch.testing.assert_close(npu_result.cpu(), cpu_result, rtol=0, atol=0, equal_nan=True)


def _layer_norm(dtype):
    x, w, b = _rand(2, 5, 8, dtype=dtype), _rand(8, dtype=dtype, seed=1), _rand(8, dtype=dtype, seed=2)
    return (x, w, b), lambda x, w, b: F.layer_norm(x, (8,), w, b, eps=1e-5)


def _layer_norm_no_affine(dtype):
    return (_rand(3, 4, 6, dtype=dtype).transpose(0, 1),), lambda x: F.layer_norm(x, (3, 6))


def _softmax(dtype):
    return (_rand(3, 7, dtype=dtype),), lambda x: torch.softmax(x, dim=-1)


def _log_softmax(dtype):
    return (_rand(4, 3, 5, dtype=dtype).transpose(1, 2),), lambda x: torch.log_softmax(x, dim=1)


def _layer_norm_one_row(dtype):
    x, w, b = _rand(1, 64, dtype=dtype), _rand(64, dtype=dtype, seed=1), _rand(64, dtype=dtype, seed=2)
    return (x, w, b), lambda x, w, b: F.layer_norm(x, (64,), w, b)


def _layer_norm_float_params(dtype):
    # a reduced-precision input with float32 weight and bias: the CPU kernel's mixed-type path
    params = torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype
    x, w, b = _rand(4, 3, 16, dtype=dtype), _rand(3, 16, dtype=params, seed=1), _rand(3, 16, dtype=params, seed=2)
    return (x, w, b), lambda x, w, b: F.layer_norm(x, (3, 16), w, b)


def _softmax_inner_dim(dtype):
    return (_rand(3, 9, 4, dtype=dtype)[:, ::2],), lambda x: torch.softmax(x, dim=1) * torch.log_softmax(x, dim=0)


def _softmax_0dim(dtype):
    return (_rand(dtype=dtype),), lambda x: torch.softmax(x, dim=0) + torch.log_softmax(x, dim=-1)


def _gelu(dtype):
    return (_rand(4, 9, dtype=dtype),), lambda x: F.gelu(x)


def _gelu_sliced(dtype):
    return (_rand(4, 18, dtype=dtype)[:, ::2],), lambda x: F.gelu(x, approximate="tanh") + F.gelu(x)


def _gelu_tanh(dtype):
    return (_rand(4, 9, dtype=dtype),), lambda x: F.gelu(x, approximate="tanh")


def _gelu_strided(dtype):
    # not contiguous (and kept so by .to()): the CPU implementation takes GeluKernel's
    # strided loop, not oneDNN, on cpu too
    return (_rand(9, 4, dtype=dtype).t(),), lambda x: F.gelu(x)


def _tanh_silu(dtype):
    return (_rand(6, 5, dtype=dtype),), lambda x: torch.tanh(x) * F.silu(x)


def _tanh_silu_sliced(dtype):
    return (_rand(6, 10, dtype=dtype)[:, ::2].t(),), lambda x: torch.tanh(x) + F.silu(x)


def _embedding(dtype):
    weight = _rand(10, 4, dtype=dtype)
    ids = torch.tensor([[1, 3, 3], [0, 9, 1]])
    return (weight, ids), lambda w, i: F.embedding(i, w) * 2


def _embedding_padding(dtype):
    weight = _rand(10, 4, dtype=dtype)
    ids = torch.tensor([2, 2, 5, 0])
    return (weight, ids), lambda w, i: F.embedding(i, w, padding_idx=2, scale_grad_by_freq=True)


def _index_select(dtype):
    return (_rand(5, 3, dtype=dtype), torch.tensor([4, 0, 0, 2])), lambda x, i: torch.index_select(x, 0, i)


def _index_select_strided(dtype):
    # a transposed source, a sliced int32 index, dim 1, a repeated row
    index = torch.tensor([3, 9, 0, 7, 0, 2], dtype=torch.int32)[::2]
    return (_rand(6, 5, dtype=dtype).t(), index), lambda x, i: torch.index_select(x, 1, i)


def _index_select_scalar_index(dtype):
    return (_rand(4, 3, 2, dtype=dtype), torch.tensor(1)), lambda x, i: torch.index_select(x, 2, i)


def _sum_mean(dtype):
    return (_rand(3, 4, 5, dtype=dtype),), lambda x: x.sum(dim=(0, 2), keepdim=True) + x.mean(dim=1).sum(1)


def _sdpa(dtype):
    q, k, v = (_rand(1, 2, 6, 8, dtype=dtype, seed=s) for s in range(3))
    return (q, k, v), lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)


CASES = {
    # name: (inputs and function, fast paths the npu forward and backward must take)
    "layer_norm": (_layer_norm, ["aten::native_layer_norm", "aten::native_layer_norm_backward"]),
    "layer_norm_no_affine": (_layer_norm_no_affine, ["aten::native_layer_norm", "aten::native_layer_norm_backward"]),
    "layer_norm_one_row": (_layer_norm_one_row, ["aten::native_layer_norm", "aten::native_layer_norm_backward"]),
    "layer_norm_float_params": (_layer_norm_float_params,
                                ["aten::native_layer_norm", "aten::native_layer_norm_backward"]),
    "softmax": (_softmax, ["aten::_softmax", "aten::_softmax_backward_data"]),
    "softmax_inner_dim": (_softmax_inner_dim, ["aten::_softmax", "aten::_softmax_backward_data",
                                               "aten::_log_softmax", "aten::_log_softmax_backward_data"]),
    "softmax_0dim": (_softmax_0dim, ["aten::_softmax", "aten::_log_softmax"]),
    "log_softmax": (_log_softmax, ["aten::_log_softmax", "aten::_log_softmax_backward_data"]),
    "gelu": (_gelu, ["aten::gelu", "aten::gelu_backward"]),
    "gelu_tanh": (_gelu_tanh, ["aten::gelu", "aten::gelu_backward"]),
    "gelu_strided": (_gelu_strided, ["aten::gelu", "aten::gelu_backward"]),
    "gelu_sliced": (_gelu_sliced, ["aten::gelu", "aten::gelu_backward"]),
    "tanh_silu": (_tanh_silu, ["aten::tanh_backward", "aten::silu_backward"]),
    "tanh_silu_sliced": (_tanh_silu_sliced, ["aten::tanh_backward", "aten::silu_backward"]),
    "embedding": (_embedding, ["aten::index_select", "aten::embedding_dense_backward"]),
    "embedding_padding": (_embedding_padding, ["aten::embedding_dense_backward"]),
    "index_select": (_index_select, ["aten::index_select"]),
    "index_select_strided": (_index_select_strided, ["aten::index_select"]),
    "index_select_scalar_index": (_index_select_scalar_index, ["aten::index_select"]),
    "sum_mean": (_sum_mean, ["aten::sum.dim_IntList", "aten::mean.dim"]),
    "sdpa": (_sdpa, ["aten::_scaled_dot_product_flash_attention_for_cpu_backward"]),
}


def _on(device, t):
    # strides kept, also those .to() would make dense (a sliced input stays sliced)
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device).copy_(t)


def _run(case, dtype, device):
    make, _ = CASES[case]
    inputs, fn = make(dtype)
    leaves = [_on(device, t).requires_grad_(t.is_floating_point()) for t in inputs]
    out = fn(*leaves)
    grad = _rand(*out.shape, dtype=out.dtype, seed=11).to(device)
    out.backward(grad)
    return out, [t.grad for t in leaves if t.is_floating_point()]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_and_gradients_equal_cpu_bits_through_the_fast_paths(case, dtype):
    before = _counts()
    npu_out, npu_grads = _run(case, dtype, "npu")
    after = _counts()
    cpu_out, cpu_grads = _run(case, dtype, "cpu")
    _assert_bits(npu_out, cpu_out)
    assert len(npu_grads) == len(cpu_grads)
    for npu_grad, cpu_grad in zip(npu_grads, cpu_grads):
        _assert_bits(npu_grad, cpu_grad)
    for name in CASES[case][1]:
        assert after.get(name, 0) > before.get(name, 0), f"{name} did not take its fast path"


def _cpu_and_npu_errors(fn, *args):
    with pytest.raises(Exception) as cpu_error:
        fn(*args)
    with pytest.raises(Exception) as npu_error:
        fn(*(a.npu() if isinstance(a, torch.Tensor) else a for a in args))
    assert npu_error.type is cpu_error.type
    return str(cpu_error.value), str(npu_error.value)


@pytest.mark.parametrize("call", [
    lambda x: torch.ops.aten._softmax(x, 1, True),  # no half-to-float softmax on cpu
    lambda x: torch.ops.aten._log_softmax(x, 1, True),
    lambda x: torch.ops.aten._softmax(x, 2, False),
    lambda x: F.layer_norm(x, (4,)),
    lambda x: torch.ops.aten.native_layer_norm(x, (5,), x.new_ones(4), None, 1e-5),
    lambda x: torch.ops.aten._softmax_backward_data(x, x[:, :2], 1, torch.float32),
    lambda x: torch.index_select(x, 1, torch.tensor([0, 5], device=x.device)),
    lambda x: torch.index_select(x, 1, torch.tensor([0.0], device=x.device)),
    lambda x: torch.index_select(x, 2, torch.tensor([0], device=x.device)),
], ids=["softmax_half_to_float", "log_softmax_half_to_float", "softmax_dim", "layer_norm_shape",
        "layer_norm_weight", "softmax_backward_sizes", "index_out_of_range", "float_index", "index_dim"])
def test_errors_are_cpu_errors(call):
    x = _rand(3, 5)
    cpu_message, npu_message = _cpu_and_npu_errors(call, x)
    assert npu_message == cpu_message


def test_gelu_backward_of_two_dtypes_equals_cpu():
    grad, x = _rand(4, 9, dtype=torch.float64), _rand(4, 9, seed=1)
    call = torch.ops.aten.gelu_backward
    _assert_bits(call(grad.npu(), x.npu(), approximate="tanh"), call(grad, x, approximate="tanh"))
    # the exact gelu of float32 goes to oneDNN, which refuses the float64 gradient
    cpu_message, npu_message = _cpu_and_npu_errors(lambda g, x: call(g, x, approximate="none"), grad, x)
    assert npu_message == cpu_message


@pytest.mark.parametrize("op", [torch.ops.aten.tanh_backward, torch.ops.aten.silu_backward], ids=str)
def test_activation_backward_of_two_dtypes_equals_cpu(op):
    grad, x = _rand(4, 9, dtype=torch.float64), _rand(4, 9, seed=1)
    _assert_bits(op(grad.npu(), x.npu()), op(grad, x))
    _assert_bits(op(x.npu(), grad.npu()), op(x, grad))


def test_empty_inputs_equal_cpu():
    for fn in (lambda x: torch.softmax(x, 1), lambda x: torch.log_softmax(x, 0), lambda x: F.layer_norm(x, (5,)),
               lambda x: F.layer_norm(x, (0, 5))):
        x = torch.empty(0, 5)
        _assert_bits(fn(x.npu()), fn(x))


def test_a_second_device_allocates_there(two_devices):
    d0, d1 = two_devices
    torch.npu.set_device(d0)
    on_d0 = torch.npu.memory_allocated(d0)
    for case in ("layer_norm", "softmax", "log_softmax", "embedding"):
        npu_out, npu_grads = _run(case, torch.float32, d1)
        cpu_out, cpu_grads = _run(case, torch.float32, "cpu")
        assert npu_out.device == d1 and all(g.device == d1 for g in npu_grads)
        _assert_bits(npu_out, cpu_out)
        for npu_grad, cpu_grad in zip(npu_grads, cpu_grads):
            _assert_bits(npu_grad, cpu_grad)
        assert torch.npu.memory_allocated(d0) == on_d0, case
    assert torch.npu.current_device() == d0.index


def test_the_npu_profiler_sends_the_calls_to_the_fallback_with_the_same_bits():
    x = _rand(3, 8).npu()
    plain = F.layer_norm(x, (8,))
    before = _counts()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        watched = F.layer_norm(x, (8,))
        torch.npu.synchronize()
    assert _counts().get("aten::native_layer_norm", 0) == before.get("aten::native_layer_norm", 0)
    device_rows = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert any("native_layer_norm" in n for n in device_rows), device_rows
    _assert_bits(watched, plain.cpu())
    # once the profiler is gone the fast path serves again
    F.layer_norm(x, (8,))
    assert _counts()["aten::native_layer_norm"] == before.get("aten::native_layer_norm", 0) + 1


def test_a_complex32_sum_dtype_goes_to_the_fallback_which_widens_it():
    x = torch.randn(3, 4, dtype=torch.complex64)
    before = _counts()
    npu_sum = x.npu().sum(dim=1, dtype=torch.complex32)
    assert _counts().get("aten::sum.dim_IntList", 0) == before.get("aten::sum.dim_IntList", 0)
    assert npu_sum.dtype == torch.complex32
    # as on CUDA: the input cast to complex32, summed in complex64, rounded back
    expected = x.to(torch.complex32).to(torch.complex64).sum(dim=1).to(torch.complex32)
    assert torch.equal(npu_sum.cpu().view(torch.float16), expected.view(torch.float16))


def test_a_cpu_index_is_refused_by_the_fallback_as_cuda_refuses_it():
    x = torch.randn(5, 3).npu()
    before = _counts()
    with pytest.raises(RuntimeError, match="index is on cpu, different from other tensors on npu:0"):
        torch.index_select(x, 0, torch.tensor([1, 2]))
    assert _counts().get("aten::index_select", 0) == before.get("aten::index_select", 0)
