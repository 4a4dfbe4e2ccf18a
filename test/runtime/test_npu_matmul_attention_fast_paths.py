"""mm, bmm, addmm, baddbmm (functional and out=) and the CPU flash attention have unboxed
npu kernels that run the CPU implementation when nothing observes and nothing captures (on
the npu tensors themselves, or on CPU aliases where it would pick oneDNN, which takes CPU
tensors only), and hand every other call to the operator fallback (docs/runtime.md).

Both paths must give cpu's bits and cpu's errors; ``torch_npu._C._fast_path_counts()``
tells which path served a call, so these tests fail if the fast path stops running in
the plain case or keeps running while the profiler, the sanitizer or a capture watches.
"""
import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401  (registers the npu device)

FLASH = "aten::_scaled_dot_product_flash_attention_for_cpu"


def _served(name, fn):
    """(result of fn(), calls of the `name` fast path it made)."""
    before = torch_npu._C._fast_path_counts().get(name, 0)
    result = fn()
    return result, torch_npu._C._fast_path_counts().get(name, 0) - before


def _rand(*shape, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed + sum(shape))
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=gen).to(dtype)
    return torch.randint(-5, 5, shape, generator=gen, dtype=dtype)


def _npu(*tensors):
    # strides kept, also those .npu() would make dense (a sliced operand stays sliced)
    return tuple(torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="npu").copy_(t) for t in tensors)


def _assert_bits(npu_result, cpu_result):
    assert npu_result.device.type == "npu"
    assert npu_result.dtype == cpu_result.dtype and npu_result.shape == cpu_result.shape
    assert npu_result.stride() == cpu_result.stride()
    torch.testing.assert_close(npu_result.cpu(), cpu_result, rtol=0, atol=0, equal_nan=True)


PRODUCTS = {
    # name: (fast path, operands, op)
    "mm": ("aten::mm", lambda d: (_rand(5, 3, dtype=d), _rand(3, 4, dtype=d)), torch.mm),
    "mm_transposed": ("aten::mm", lambda d: (_rand(3, 5, dtype=d).t(), _rand(4, 3, dtype=d).t()), torch.mm),
    "mm_empty_inner": ("aten::mm", lambda d: (_rand(5, 0, dtype=d), _rand(0, 4, dtype=d)), torch.mm),
    "mm_empty_rows": ("aten::mm", lambda d: (_rand(0, 3, dtype=d), _rand(3, 4, dtype=d)), torch.mm),
    "bmm": ("aten::bmm", lambda d: (_rand(2, 5, 3, dtype=d), _rand(2, 3, 4, dtype=d)), torch.bmm),
    "bmm_strided": ("aten::bmm", lambda d: (_rand(2, 3, 10, dtype=d)[:, :, ::2].transpose(1, 2),
                                            _rand(2, 3, 4, dtype=d)), torch.bmm),
    "addmm_row_bias": ("aten::addmm", lambda d: (_rand(4, dtype=d), _rand(5, 3, dtype=d), _rand(3, 4, dtype=d)),
                       lambda c, a, b: torch.addmm(c, a, b, beta=2, alpha=3)),
    "addmm_full_bias": ("aten::addmm", lambda d: (_rand(5, 4, dtype=d), _rand(5, 3, dtype=d), _rand(4, 3, dtype=d).t()),
                        torch.addmm),
    "addmm_0dim_bias": ("aten::addmm", lambda d: (_rand(dtype=d), _rand(5, 3, dtype=d), _rand(3, 4, dtype=d)),
                        torch.addmm),
    "addmm_empty_inner": ("aten::addmm", lambda d: (_rand(4, dtype=d), _rand(5, 0, dtype=d), _rand(0, 4, dtype=d)),
                          lambda c, a, b: torch.addmm(c, a, b, beta=2)),
    "addmm_empty_rows": ("aten::addmm", lambda d: (_rand(4, dtype=d), _rand(0, 3, dtype=d), _rand(3, 4, dtype=d)),
                         torch.addmm),
    "linear": ("aten::addmm", lambda d: (_rand(5, 3, dtype=d), _rand(4, 3, dtype=d), _rand(4, dtype=d)), F.linear),
    "baddbmm": ("aten::baddbmm", lambda d: (_rand(1, 5, 4, dtype=d), _rand(2, 5, 3, dtype=d), _rand(2, 3, 4, dtype=d)),
                lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2)),
}
# Above BLAS's and oneDNN's size thresholds: cpublas hands bfloat16 and float16 products to
# oneDNN by pointer, bmm takes MKL's batched gemm or oneDNN (on CPU tensors only).
LARGE_PRODUCTS = {
    "mm_large": ("aten::mm", lambda d: (_rand(33, 65, dtype=d), _rand(65, 17, dtype=d)), torch.mm),
    "addmm_large_transposed": ("aten::addmm", lambda d: (_rand(40, dtype=d), _rand(65, 33, dtype=d).t(),
                                                         _rand(40, 65, dtype=d).t()), torch.addmm),
    "addmm_large_strided": ("aten::addmm", lambda d: (_rand(33, 40, dtype=d), _rand(33, 130, dtype=d)[:, ::2],
                                                      _rand(65, 40, dtype=d)),
                            lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=-2)),
    "bmm_large": ("aten::bmm", lambda d: (_rand(3, 20, 30, dtype=d), _rand(3, 30, 25, dtype=d)), torch.bmm),
    "bmm_large_transposed": ("aten::bmm", lambda d: (_rand(3, 30, 20, dtype=d).transpose(1, 2),
                                                     _rand(3, 25, 30, dtype=d).transpose(1, 2)), torch.bmm),
    "bmm_large_strided": ("aten::bmm", lambda d: (_rand(3, 20, 60, dtype=d)[:, :, ::2], _rand(3, 30, 25, dtype=d)),
                          torch.bmm),
    "baddbmm_large": ("aten::baddbmm", lambda d: (_rand(3, 20, 25, dtype=d), _rand(3, 20, 30, dtype=d),
                                                  _rand(3, 30, 25, dtype=d)),
                      lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2)),
}
PRODUCTS.update(LARGE_PRODUCTS)
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.complex64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", sorted(PRODUCTS))
def test_products_equal_cpu_through_the_fast_path(case, dtype):
    fast_path, operands, op = PRODUCTS[case]
    cpu_args = operands(dtype)
    expected = op(*cpu_args)
    got, served = _served(fast_path, lambda: op(*_npu(*cpu_args)))
    _assert_bits(got, expected)
    assert served == 1


@pytest.mark.parametrize("name,fast_path,operands,op", [
    ("mm", "aten::mm.out", lambda: (_rand(5, 3), _rand(3, 4)), lambda a, b, out: torch.mm(a, b, out=out)),
    ("bmm", "aten::bmm.out", lambda: (_rand(2, 5, 3), _rand(2, 3, 4)), lambda a, b, out: torch.bmm(a, b, out=out)),
    ("addmm", "aten::addmm.out", lambda: (_rand(4), _rand(5, 3), _rand(4, 3).t()),
     lambda c, a, b, out: torch.addmm(c, a, b, beta=2, alpha=0.5, out=out)),
    ("baddbmm", "aten::baddbmm.out", lambda: (_rand(2, 5, 4), _rand(2, 5, 3), _rand(2, 3, 4)),
     lambda c, a, b, out: torch.baddbmm(c, a, b, out=out)),
])
@pytest.mark.parametrize("out_kind", ["right_size", "empty", "wrong_size", "transposed"])
def test_out_variants_equal_cpu(name, fast_path, operands, op, out_kind):
    cpu_args = operands()
    shape = op(*cpu_args, out=torch.empty(0)).shape

    def make_out():
        if out_kind == "right_size":
            return torch.full(shape, 7.0)
        if out_kind == "empty":
            return torch.empty(0)
        if out_kind == "wrong_size":
            return torch.empty(3)  # resized (with ATen's warning) on both devices
        return torch.full((*shape[:-2], shape[-1], shape[-2]), 7.0).transpose(-1, -2)  # kept strides

    cpu_out = make_out()
    npu_out = make_out().npu()
    storage = npu_out.untyped_storage().data_ptr()
    returned_cpu = op(*cpu_args, out=cpu_out)
    returned, served = _served(fast_path, lambda: op(*_npu(*cpu_args), out=npu_out))
    assert returned is npu_out and returned_cpu is cpu_out
    _assert_bits(npu_out, cpu_out)
    assert served == 1
    if out_kind in ("right_size", "transposed"):
        assert npu_out.untyped_storage().data_ptr() == storage  # written in place


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_a_product_keeps_onednn_enabled(dtype):
    # bmm's CPU implementation gives reduced-precision operands to oneDNN, which takes only
    # CPU tensors: given npu tensors it would fail, and bmm would switch oneDNN off for the
    # whole process (and compute the rest of the process's products another way).
    a, b = _rand(3, 20, 30, dtype=dtype), _rand(3, 30, 25, dtype=dtype)
    assert torch.backends.mkldnn.enabled
    got, served = _served("aten::bmm", lambda: torch.bmm(*_npu(a, b)))
    assert served == 1 and torch.backends.mkldnn.enabled
    _assert_bits(got, torch.bmm(a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("size", [(5, 3, 4), (33, 65, 17)], ids=["small", "large"])
def test_beta_zero_ignores_nan_in_self(dtype, size):
    m, k, n = size
    c = torch.full((m, n), float("nan"), dtype=dtype)
    a, b = _rand(m, k, dtype=dtype), _rand(k, n, dtype=dtype)
    expected = torch.addmm(c, a, b, beta=0, alpha=1.5)
    assert not expected.isnan().any()
    got, served = _served("aten::addmm", lambda: torch.addmm(*_npu(c, a, b), beta=0, alpha=1.5))
    _assert_bits(got, expected)
    out = torch.full((m, n), float("nan"), dtype=dtype, device="npu")
    _, served_out = _served("aten::addmm.out", lambda: torch.addmm(*_npu(c, a, b), beta=0, alpha=1.5, out=out))
    _assert_bits(out, expected)
    assert served == 1 and served_out == 1


def test_out_of_another_dtype_raises_the_cpu_error():
    a, b, c = _rand(5, 3), _rand(3, 4), _rand(4)
    for op, args in ((torch.mm, (a, b)), (torch.bmm, (a[None], b[None])), (torch.addmm, (c, a, b))):
        with pytest.raises(RuntimeError) as cpu_error:
            op(*args, out=torch.empty(0, dtype=torch.float64))
        with pytest.raises(RuntimeError) as npu_error:
            op(*_npu(*args), out=torch.empty(0, dtype=torch.float64, device="npu"))
        assert str(npu_error.value) == str(cpu_error.value)


def test_a_bias_that_does_not_broadcast_raises_the_cpu_error_and_leaves_out_alone():
    a, b, c = _rand(5, 3), _rand(3, 4), _rand(3)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.addmm(c, a, b, out=torch.full((5, 4), 7.0))
    out = torch.full((5, 4), 7.0, device="npu")
    with pytest.raises(RuntimeError) as npu_error:
        torch.addmm(*_npu(c, a, b), out=out)
    assert str(npu_error.value) == str(cpu_error.value)
    torch.testing.assert_close(out.cpu(), torch.full((5, 4), 7.0), rtol=0, atol=0)


def test_out_overlapping_the_bias_raises_the_cpu_error():
    a, b = _rand(4, 3), _rand(3, 4)
    base = _rand(5, 4)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.addmm(base[:4], a, b, out=base[1:])
    npu_base = base.npu()
    with pytest.raises(RuntimeError) as npu_error:
        torch.addmm(npu_base[:4], *_npu(a, b), out=npu_base[1:])
    assert str(npu_error.value) == str(cpu_error.value)


def test_products_on_a_second_device_allocate_there(two_devices):
    d0, d1 = two_devices
    a, b, c = _rand(33, 65), _rand(65, 17), _rand(17)
    q = _rand(1, 2, 8, 16)
    x, y, z, qn = (t.to(d1) for t in (a, b, c, q))
    torch.npu.set_device(d0)
    on_d0 = torch.npu.memory_allocated(d0)
    results = {
        "aten::mm": (lambda: torch.mm(x, y), torch.mm(a, b)),
        "aten::addmm": (lambda: torch.addmm(z, x, y), torch.addmm(c, a, b)),
        "aten::bmm": (lambda: torch.bmm(x[None], y[None]), torch.bmm(a[None], b[None])),
        FLASH: (lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(qn, qn, qn, 0.0)[0],
                torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q, 0.0)[0]),
    }
    for name, (run, expected) in results.items():
        got, served = _served(name, run)
        assert served == 1 and got.device == d1, name
        _assert_bits(got, expected)
        assert torch.npu.memory_allocated(d0) == on_d0, name
    out = torch.empty(0, device=d1)
    torch.addmm(z, x, y, out=out)
    assert out.device == d1 and torch.npu.memory_allocated(d0) == on_d0
    _assert_bits(out, torch.addmm(c, a, b))
    assert torch.npu.current_device() == d0.index


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str)
def test_gradients_through_the_products_equal_cpu(dtype):
    x, w, b = _rand(6, 33, dtype=dtype), _rand(17, 33, dtype=dtype, seed=1), _rand(17, dtype=dtype, seed=2)
    y = _rand(3, 17, 9, dtype=dtype, seed=3)

    def run(device):
        leaves = [t.detach().to(device).requires_grad_() for t in (x, w, b, y)]
        xd, wd, bd, yd = leaves
        h = F.linear(xd, wd, bd)  # addmm, then mm for the gradients
        out = torch.bmm(h.t().reshape(1, 17, 6).expand(3, 17, 6).transpose(1, 2), yd) + torch.mm(h, wd).sum()
        out.backward(_rand(*out.shape, dtype=dtype, seed=4).to(device))
        return [out] + [t.grad for t in leaves]

    before = torch_npu._C._fast_path_counts()
    got = run("npu")
    after = torch_npu._C._fast_path_counts()
    for g, e in zip(got, run("cpu")):
        _assert_bits(g, e)
    for name in ("aten::addmm", "aten::mm", "aten::bmm"):
        assert after[name] > before.get(name, 0), name


def test_out_that_is_also_an_input_equals_cpu():
    c, a, b = _rand(5, 4), _rand(5, 3), _rand(3, 4)
    expected = c.clone()
    torch.addmm(expected, a, b, out=expected)
    x = c.npu()
    _, served = _served("aten::addmm.out", lambda: torch.addmm(x, a.npu(), b.npu(), out=x))
    _assert_bits(x, expected)
    assert served == 1


def test_errors_are_cpu_errors():
    a, b = _rand(5, 3), _rand(4, 3)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.mm(a, b)
    with pytest.raises(RuntimeError) as npu_error:
        torch.mm(*_npu(a, b))
    assert str(npu_error.value) == str(cpu_error.value)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.mm(a, b.t().double())
    with pytest.raises(RuntimeError) as npu_error:
        torch.mm(a.npu(), b.t().double().npu())
    assert str(npu_error.value) == str(cpu_error.value)


def test_a_cpu_operand_takes_the_fallback_and_its_device_rule():
    a, b = _rand(5, 3), _rand(3, 4)
    _, served = _served("aten::mm", lambda: pytest.raises(RuntimeError, torch.mm, a.npu(), b))
    assert served == 0
    # A 0-dim cpu bias is not a TensorIterator scalar for addmm on CUDA either: refused.
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.addmm(torch.tensor(1.0), a.npu(), b.npu())


def test_tensors_of_two_devices_raise(two_devices):
    d0, d1 = two_devices
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(torch.ones(2, 2, device=d0), torch.ones(2, 2, device=d1))
    out, served = _served("aten::mm", lambda: torch.mm(torch.ones(2, 2, device=d1), torch.ones(2, 2, device=d1)))
    assert out.device == d1 and served == 1
    torch.testing.assert_close(out.cpu(), torch.full((2, 2), 2.0), rtol=0, atol=0)


SDPA = {
    "causal": (lambda d: (_rand(2, 4, 32, 16, dtype=d), _rand(2, 4, 32, 16, dtype=d, seed=1),
                          _rand(2, 4, 32, 16, dtype=d, seed=2)), dict(is_causal=True)),
    "float_mask_and_scale": (lambda d: (_rand(1, 2, 8, 16, dtype=d), _rand(1, 2, 12, 16, dtype=d, seed=1),
                                        _rand(1, 2, 12, 16, dtype=d, seed=2)),
                             dict(attn_mask=_rand(8, 12), scale=0.3)),
    "bool_mask": (lambda d: (_rand(1, 2, 8, 16, dtype=d), _rand(1, 2, 12, 16, dtype=d, seed=1),
                             _rand(1, 2, 12, 16, dtype=d, seed=2)),
                  dict(attn_mask=torch.rand(8, 12, generator=torch.Generator().manual_seed(3)) > 0.3)),
}


def _strided_heads(t):
    # Heads interleaved in one buffer, as a fused qkv projection leaves them.
    b, h, s, e = t.shape
    return t.transpose(1, 2).contiguous().transpose(1, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", sorted(SDPA))
@pytest.mark.parametrize("layout", ["contiguous", "strided_heads"])
def test_flash_attention_equals_cpu_through_the_fast_path(case, dtype, layout):
    operands, kwargs = SDPA[case]
    q, k, v = operands(dtype)
    if layout == "strided_heads":
        q, k, v = (_strided_heads(t) for t in (q, k, v))
    if kwargs.get("attn_mask") is not None and kwargs["attn_mask"].dtype != torch.bool:
        kwargs = dict(kwargs, attn_mask=kwargs["attn_mask"].to(dtype))
    expected = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, **_flash_kwargs(kwargs))
    npu_kwargs = {key: (val.npu() if isinstance(val, torch.Tensor) else val) for key, val in kwargs.items()}
    got, served = _served(FLASH, lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        *_npu(q, k, v), 0.0, **_flash_kwargs(npu_kwargs)))
    for g, e in zip(got, expected):
        _assert_bits(g, e)
    assert served == 1
    # The public function takes the same kernel on both devices.
    _assert_bits(F.scaled_dot_product_attention(*_npu(q, k, v), **npu_kwargs),
                 F.scaled_dot_product_attention(q, k, v, **kwargs))


def _flash_kwargs(kwargs):
    out = {"is_causal": kwargs.get("is_causal", False)}
    if "attn_mask" in kwargs:
        mask = kwargs["attn_mask"]
        # The flash kernel takes an additive mask; the public function converts a boolean one.
        out["attn_mask"] = mask if mask.dtype != torch.bool else torch.zeros(
            mask.shape, dtype=torch.float32, device=mask.device).masked_fill(~mask, float("-inf"))
    if "scale" in kwargs:
        out["scale"] = kwargs["scale"]
    return out


def test_profiler_takes_the_fallback_and_sees_the_npu_work():
    a, b, c = _rand(5, 3), _rand(3, 4), _rand(4)
    x, y, z = _npu(a, b, c)
    out = torch.empty(5, 4, device="npu")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        _, served = _served("aten::addmm.out", lambda: torch.addmm(z, x, y, out=out))
        _, served_mm = _served("aten::mm", lambda: torch.mm(x, y))
        torch.npu.synchronize()
    assert served == 0 and served_mm == 0
    _assert_bits(out, torch.addmm(c, a, b))
    device_rows = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert any("addmm" in n for n in device_rows) and any(n.endswith("mm") for n in device_rows), device_rows
    # Once the profiler is gone the fast path serves again.
    assert _served("aten::mm", lambda: torch.mm(x, y))[1] == 1


def test_sanitizer_takes_the_fallback_and_sees_the_race():
    import torch.npu._sanitizer as san
    from torch_npu.npu import _stream_sanitizer

    x, y = _npu(_rand(16, 16), _rand(16, 16))
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    san.enable_npu_sanitizer()
    try:
        with torch.npu.stream(side):
            product, served = _served("aten::mm", lambda: torch.mm(x, y))  # written on the side stream
        assert served == 0
        with pytest.raises(san.NPUSanitizerErrors) as excinfo:
            torch.mm(product, y)  # read on the default stream without waiting for the side stream
        error = excinfo.value.errors[0]
        assert error.current_access.operator == "aten::mm" and error.previous_access.operator == "aten::mm"
    finally:
        _stream_sanitizer.disable_npu_sanitizer()
        torch.npu.synchronize()


def test_capture_records_instead_of_running():
    a, b, c = _rand(5, 3), _rand(3, 4), _rand(4)
    q = _rand(1, 2, 8, 16)
    x, y, z, qn = _npu(a, b, c, q)
    out = torch.full((5, 4), 7.0, device="npu")
    before = torch_npu._C._fast_path_counts()
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        torch.addmm(z, x, y, out=out)
        product = torch.mm(x, y)
        attention = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(qn, qn, qn, 0.0, is_causal=True)[0]
    after = torch_npu._C._fast_path_counts()
    assert all(after[k] == before.get(k, 0) for k in ("aten::addmm.out", "aten::mm", FLASH))
    torch.npu.synchronize()
    torch.testing.assert_close(out.cpu(), torch.full((5, 4), 7.0), rtol=0, atol=0)  # recorded, not run
    graph.replay()
    torch.npu.synchronize()
    _assert_bits(out, torch.addmm(c, a, b))
    _assert_bits(product, torch.mm(a, b))
    _assert_bits(attention, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q, 0.0, is_causal=True)[0])


def test_compiled_linear_layers_call_the_fast_path():
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    x = _rand(4, 16)
    with torch.no_grad():
        expected = torch.compile(model)(x)
        compiled = torch.compile(model.npu())
        compiled(x.npu())
        got, served = _served("aten::addmm.out", lambda: compiled(x.npu()))
    assert served == 2  # Inductor's two extern addmm calls
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)
