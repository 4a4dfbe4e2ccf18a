"""npu takes the dtypes CUDA takes: an OpInfo sweep over the dtypes CUDA supports and cpu does not.

Code written for an accelerator follows CUDA's dtype support (transformers' Mixtral counts
tokens per expert with ``torch.histc`` on int32, which only CUDA's kernel takes). For every
``op_db`` entry whose ``supported_dtypes("cuda")`` is wider than ``supported_dtypes("cpu")``,
each sample in each CUDA-only dtype runs on cpu and on npu:

- where cpu runs it after all (OpInfo's cpu list is stale), npu gives cpu's bits;
- where cpu raises, the innermost aten operator that raised, with that dtype, must be an
  entry of the runtime's widening table (``torch.ops.npu._cuda_dtype_widenings()``), and npu
  must equal cpu computing that sample in the table's wider dtype, rounded back to the
  narrow one (what CUDA computes in its accumulation type), bit for bit;
- ``torch.fft`` on float16 (refused by the composite before any operator on every device
  but CUDA) must equal cpu running the transforms in float32 with each transform's result
  rounded to half precision (cuFFT's half-precision transforms), in CUDA's result dtype;
- complex ``nansum``/``nanmean`` (refused by an explicit check on cpu only) must equal cpu's
  ``sum`` of the input with its NaN elements zeroed, as CUDA's kernel defines it;
- the pairs no wider dtype can serve would be listed in ``NOT_SERVED`` with the reason and
  must still raise on npu; none is left.

Every table entry must be reached by some sample (forward here, backward in
``test_backward_of_reduced_float_ops``), so the table holds nothing op_db does not ask for.
"""
from __future__ import annotations

import collections
import unittest.mock

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._python_dispatch import TorchDispatchMode

import torch_npu  # noqa: F401
from philox_reference import seed_one_stream

NPU = torch.device("npu", 0)
SAMPLES_PER_DTYPE = 4

# (op_db name, dtype) -> why the widening table does not serve it (and npu must still raise).
NOT_SERVED: dict[tuple[str, torch.dtype], str] = {}
FFT_TRANSFORMS = {"aten::_fft_c2c", "aten::_fft_r2c", "aten::_fft_c2r"}
# Ops whose OpInfo entry has no cpu dtypes at all (CUDA-only kernels or CUDA-only variants).
CUDA_ONLY_ENTRIES = {"torch.ops.aten._flash_attention_forward", "torch.ops.aten._efficient_attention_forward",
                     "nn.functional.batch_norm"}
# Table entries reached only by a backward pass or by an in-place variant.
REACHED_ELSEWHERE = {"aten::avg_pool3d_backward", "aten::_upsample_bilinear2d_aa_backward",
                     "aten::multi_margin_loss_backward", "aten::multilabel_margin_loss_backward",
                     "aten::rrelu_with_noise_", "aten::_fft_r2c"}  # _fft_r2c: test_stft_of_float16


def widening_table() -> dict[tuple[str, str], torch.dtype]:
    table = {}
    for entry in torch.ops.npu._cuda_dtype_widenings():
        op, narrow, compute = entry.rsplit(":", 2)
        table[(op, narrow)] = getattr(torch, _TORCH_NAMES[compute])
    return table


_TORCH_NAMES = {"Bool": "bool", "Byte": "uint8", "Char": "int8", "Short": "int16", "Int": "int32", "Long": "int64",
                "Half": "float16", "BFloat16": "bfloat16", "Float": "float32", "Double": "float64",
                "ComplexHalf": "complex32", "ComplexFloat": "complex64", "ComplexDouble": "complex128"}
_C10_NAMES = {getattr(torch, v): k for k, v in _TORCH_NAMES.items()}


class InnermostFailure(TorchDispatchMode):
    """Records the aten operator whose kernel raised first (the innermost one)."""

    def __init__(self):
        super().__init__()
        self.failed = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            if self.failed is None:
                self.failed = func._schema.name
            raise


def _map(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: _map(v, fn) for k, v in obj.items()}
    return obj


def _narrowed(computed: torch.dtype, narrow: torch.dtype, compute: torch.dtype) -> torch.dtype:
    """The dtype CUDA returns for a result cpu computed in `computed` (the runtime's rule)."""
    if computed == compute:
        return narrow
    if narrow.is_complex and computed == compute.to_real():
        return narrow.to_real()
    if narrow.is_floating_point and computed == compute.to_complex():
        return narrow.to_complex()
    return computed


class WidenedCpu(TorchDispatchMode):
    """cpu, with each aten operator of a table entry run in the wider dtype and rounded back.

    The reference for npu: a composite (hfft2: c2c then c2r) rounds to the narrow dtype
    between its operators, as CUDA's kernels do."""

    def __init__(self, table):
        super().__init__()
        self.table = table

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        tensors = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)]
        requested = kwargs.get("dtype")
        if requested is not None and (name, _C10_NAMES[requested]) not in self.table:
            requested = None
        narrow = requested or next((t.dtype for t in tensors if (name, _C10_NAMES[t.dtype]) in self.table), None)
        if narrow is None:
            return func(*args, **kwargs)
        compute = self.table[(name, _C10_NAMES[narrow])]

        def widen(t):
            # Under dtype=<narrow> a reduction's input is cast to it first, as CUDA's are.
            return t.to(narrow).to(compute) if t.dtype == narrow or requested else t

        wide_args, wide_kwargs = _map(args, widen), _map(kwargs, widen)
        if requested:
            wide_kwargs["dtype"] = compute
        out = func(*wide_args, **wide_kwargs)
        schema_args = func._schema.arguments
        write_names = {a.name for a in schema_args if a.alias_info is not None and a.alias_info.is_write}
        write_positions = {i for i, a in enumerate(schema_args) if a.name in write_names}
        back = {}
        for i, a in enumerate(args):
            if i in write_positions and isinstance(a, torch.Tensor) and a.dtype == narrow:
                back[id(wide_args[i])] = a
        for k, a in kwargs.items():
            if k in write_names and isinstance(a, torch.Tensor) and a.dtype == narrow:
                back[id(wide_kwargs[k])] = a

        def narrow_back(t):
            # A written argument is returned as itself (written back below).
            return back[id(t)] if id(t) in back else t.to(_narrowed(t.dtype, narrow, compute))

        for wide_id, orig in back.items():
            for w in (*wide_args, *wide_kwargs.values()):
                if id(w) == wide_id:
                    orig.resize_(w.shape).copy_(w)
        return _map(out, narrow_back)


class HalfPrecisionFftCpu(TorchDispatchMode):
    """cpu's transforms (given float32 inputs) with each result rounded to half precision."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func._schema.name not in FFT_TRANSFORMS:
            return out
        return out.to(_half_precision(out.dtype)).to(out.dtype)


def _half_precision(dtype: torch.dtype) -> torch.dtype:
    return torch.complex32 if dtype.is_complex else torch.float16


def _half_fft_on_cpu(op, sample):
    """What CUDA computes for a float16 torch.fft sample, on cpu."""
    with HalfPrecisionFftCpu():
        wide = _call(op, sample, "cpu", lambda t: t.float() if t.dtype == torch.float16 else t)
    return _map(wide, lambda t: t.to(_half_precision(t.dtype)))


class CudaComplexNansum(TorchDispatchMode):
    """cpu, with nansum of a complex input as CUDA defines it: the sum of its non-NaN elements."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._schema.name == "aten::nansum" and args[0].is_complex():
            x, dim, *rest = (*args, None) if len(args) == 1 else args
            return torch.ops.aten.sum.dim_IntList(x.masked_fill(x.isnan(), 0), dim, *rest, **(kwargs or {}))
        return func(*args, **(kwargs or {}))


def _call(op, sample, device, convert=lambda t: t):
    args = _map((sample.input, *sample.args), lambda t: convert(t.detach().to(device)))
    kwargs = _map(sample.kwargs, lambda t: convert(t.detach().to(device)))
    # Random ops (rrelu): cpu draws what an npu call at the same seed draws, also where the
    # OpInfo's op seeds itself.
    with unittest.mock.patch.object(torch, "manual_seed", seed_one_stream):
        seed_one_stream(0)
        return op(*args, **kwargs)


def _assert_bits_equal(got, want, what):
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        if not isinstance(w, torch.Tensor):
            assert g == w, what
            continue
        assert g.device.type == "npu", what
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype}, expected {w.dtype}"
        torch.testing.assert_close(g.cpu(), w, atol=0, rtol=0, equal_nan=True, msg=lambda m: f"{what}: {m}")


def _cuda_only_pairs():
    for op in op_db:
        extra = set(op.supported_dtypes("cuda")) - set(op.supported_dtypes("cpu"))
        if extra and op.full_name not in CUDA_ONLY_ENTRIES and op.name not in CUDA_ONLY_ENTRIES:
            for dtype in sorted(extra, key=str):
                yield op, dtype


def test_cuda_only_dtypes_of_op_db_run_on_npu_as_cpu_in_the_wider_dtype():
    table = widening_table()
    counts = collections.Counter()
    reached = set()
    for op, dtype in _cuda_only_pairs():
        what_pair = f"{op.full_name} {dtype}"
        counts["pairs"] += 1
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:SAMPLES_PER_DTYPE]
        for i, sample in enumerate(samples):
            what = f"{what_pair} sample {i}"
            counts["samples"] += 1
            probe = InnermostFailure()
            cpu_error = None
            try:
                with probe:
                    want = _call(op, sample, "cpu")
            except Exception as e:
                cpu_error = e
            if cpu_error is None:
                _assert_bits_equal(_call(op, sample, NPU), want, what)
                counts["cpu has a kernel"] += 1
                continue
            if (op.name, dtype) in NOT_SERVED:
                with pytest.raises(type(cpu_error)):
                    _call(op, sample, NPU)
                counts["not served (listed)"] += 1
                continue
            if op.name.startswith("fft.") and dtype == torch.float16:
                _assert_bits_equal(_call(op, sample, NPU), _half_fft_on_cpu(op, sample), what)
                counts["float16 fft as cuFFT"] += 1
                continue
            if op.name in ("nansum", "nanmean") and dtype.is_complex:
                with WidenedCpu(table), CudaComplexNansum():
                    want = _call(op, sample, "cpu")
                _assert_bits_equal(_call(op, sample, NPU), want, what)
                counts["complex nansum as CUDA"] += 1
                continue
            failed = probe.failed
            key = (failed, _C10_NAMES[dtype])
            assert key in table, f"{what}: cpu's {failed} has no {dtype} kernel and the widening table lacks it"
            reached.add(failed)
            with WidenedCpu(table):
                want = _call(op, sample, "cpu")
            _assert_bits_equal(_call(op, sample, NPU), want, what)
            counts["agree in the wider dtype"] += 1
    print(dict(counts))
    assert counts["agree in the wider dtype"] > 0 and counts["float16 fft as cuFFT"] > 0
    assert counts["complex nansum as CUDA"] > 0 and counts["not served (listed)"] == 0
    assert {op for op, _ in table} - reached == REACHED_ELSEWHERE


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_backward_of_reduced_float_ops(dtype):
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    x5 = torch.randn(2, 3, 4, 6, 6, generator=g)
    x4 = torch.randn(2, 3, 5, 7, generator=g)
    scores = torch.randn(4, 5, generator=g)
    target = torch.randint(0, 5, (4,), generator=g)
    multilabel = torch.tensor([[3, 0, -1, 1, 2]] * 4)
    cases = [
        (lambda x, d: F.avg_pool3d(x, 2), x5),
        (lambda x, d: torch.ops.aten._upsample_bilinear2d_aa(x, [9, 4], False, None, None), x4),
        (lambda x, d: F.multi_margin_loss(x, target.to(d)), scores),
        (lambda x, d: F.multilabel_margin_loss(x, multilabel.to(d)), scores),
    ]
    for fn, base in cases:
        leaves = {}
        for device, work in ((NPU, dtype), ("cpu", torch.float32)):
            leaf = base.to(dtype).to(work).to(device).requires_grad_()
            out = fn(leaf, device)
            (grad,) = torch.autograd.grad(out, leaf, torch.ones_like(out))
            leaves[str(device)] = (out, grad)
        (out_npu, grad_npu), (out_cpu, grad_cpu) = leaves["npu:0"], leaves["cpu"]
        _assert_bits_equal((out_npu, grad_npu), (out_cpu.to(dtype), grad_cpu.to(dtype)), str(fn))


def test_rrelu_in_place_half_writes_back_like_the_functional_form():
    x = torch.randn(64, generator=torch.Generator().manual_seed(3)).half()
    torch.npu.manual_seed(5)
    want = torch.nn.functional.rrelu(x.npu(), training=True)
    torch.npu.manual_seed(5)
    got = x.npu()
    same = torch.nn.functional.rrelu_(got, training=True)
    assert same is got
    assert torch.equal(got.cpu(), want.cpu()) and got.dtype == torch.float16
    assert not torch.equal(got.cpu(), x)  # negative values were scaled


def test_mixtral_routing_counts_tokens_per_expert_like_cuda():
    experts = 8
    g = torch.Generator().manual_seed(0)
    routed = torch.randint(0, experts, (37, 2), generator=g)
    want = torch.bincount(routed.flatten(), minlength=experts).int()
    got = torch.histc(routed.to(NPU).int(), bins=experts, min=0, max=experts - 1)
    assert got.dtype == torch.int32 and got.device == NPU  # CUDA returns the input's dtype
    assert torch.equal(got.cpu(), want)


def test_mixtral_routing_under_inductor():
    experts = 8

    def route(logits):
        top = torch.topk(logits, 2, dim=-1).indices
        return torch.histc(top.int(), bins=experts, min=0, max=experts - 1)

    logits = torch.randn(37, experts, generator=torch.Generator().manual_seed(1))
    got = torch.compile(route, backend="inductor")(logits.to(NPU))
    assert got.dtype == torch.int32
    want = torch.bincount(torch.topk(logits, 2, dim=-1).indices.flatten(), minlength=experts).int()
    assert torch.equal(got.cpu(), want)


def test_widened_ops_are_captured_and_replayed_in_npu_graphs():
    x = torch.randint(0, 8, (50,), dtype=torch.int32, generator=torch.Generator().manual_seed(2)).to(NPU)
    torch.histc(x, bins=8, min=0, max=7)  # warm-up outside the capture, as on CUDA
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        counts = torch.histc(x, bins=8, min=0, max=7)
    for seed in (3, 4):
        fresh = torch.randint(0, 8, (50,), dtype=torch.int32, generator=torch.Generator().manual_seed(seed))
        x.copy_(fresh.to(NPU))
        graph.replay()
        assert counts.dtype == torch.int32
        assert torch.equal(counts.cpu(), torch.bincount(fresh, minlength=8).int())


@pytest.mark.parametrize("dtype", [torch.complex32, torch.complex64, torch.complex128], ids=str)
def test_complex_nansum_and_nanmean_skip_nan_elements_like_cuda(dtype):
    # Small integers: every sum is exact, so the order of the additions does not matter.
    g = torch.Generator().manual_seed(0)
    real = torch.randint(-8, 8, (6, 5), generator=g).double()
    imag = torch.randint(-8, 8, (6, 5), generator=g).double()
    real[1, 2] = float("nan")  # a NaN real part drops the whole element
    imag[4, 0] = float("nan")
    real[3, 3] = imag[3, 3] = float("nan")
    nan = real.isnan() | imag.isnan()
    x = torch.complex(real, imag)
    wide = x.to(torch.complex64 if dtype == torch.complex32 else dtype)
    x = wide.to(dtype).to(NPU)
    want_sum = torch.complex(real.masked_fill(nan, 0).sum(1), imag.masked_fill(nan, 0).sum(1))
    kept = (~nan).sum(1)
    got = torch.nansum(x, dim=1)
    assert got.dtype == dtype
    assert torch.equal(got.cpu().to(torch.complex128), want_sum)
    got_mean = torch.nanmean(x, dim=1)
    assert got_mean.dtype == dtype
    torch.testing.assert_close(got_mean.cpu().to(torch.complex128), want_sum / kept,
                               rtol=1e-3 if dtype == torch.complex32 else 1e-6, atol=0)
    out = torch.empty(0, dtype=dtype, device=NPU)
    assert torch.nansum(x, dim=1, out=out) is out and torch.equal(out.cpu().to(torch.complex128), want_sum)
    with pytest.raises(RuntimeError, match="does not support complex inputs"):
        torch.nansum(wide)  # cpu keeps its refusal


def test_complex_nansum_gradient_is_zero_at_nan_elements():
    x = torch.tensor([1 + 2j, complex(float("nan"), 1), 3 - 1j], dtype=torch.complex64)
    leaf = x.to(NPU).requires_grad_()
    torch.nansum(leaf).abs().backward()
    ref = x.clone().requires_grad_()
    torch.where(ref.isnan(), 0, ref).sum().abs().backward()
    assert torch.equal(leaf.grad.cpu(), ref.grad) and ref.grad[1] == 0


def test_prod_with_complex32_dtype_computes_in_complex64_like_cuda():
    g = torch.Generator().manual_seed(1)
    x = torch.complex(torch.rand(7, generator=g) + 0.5, torch.rand(7, generator=g) - 0.5)
    for given in (x.to(torch.complex32), x, (x.real * 4).long()):
        got = torch.prod(given.to(NPU), dtype=torch.complex32)
        want = torch.prod(given.to(torch.complex32).to(torch.complex64)).to(torch.complex32)
        assert got.dtype == torch.complex32
        assert torch.equal(got.cpu().to(torch.complex64), want.to(torch.complex64)), given.dtype
    got = torch.sum(x.to(NPU), dim=0, dtype=torch.complex32)
    want = torch.sum(x.to(torch.complex32).to(torch.complex64), 0).to(torch.complex32)
    assert got.dtype == torch.complex32 and torch.equal(got.cpu().to(torch.complex64), want.to(torch.complex64))


def test_stft_of_float16_computes_the_transform_in_float32():
    x = torch.randn(2, 256, generator=torch.Generator().manual_seed(2)).half()
    window = torch.hann_window(64).half()
    got = torch.stft(x.to(NPU), 64, hop_length=16, window=window.to(NPU), return_complex=True)
    with WidenedCpu(widening_table()):
        want = torch.stft(x, 64, hop_length=16, window=window, return_complex=True)
    _assert_bits_equal(got, want, "stft")
    with pytest.raises(RuntimeError, match="powers of two"):
        torch.stft(x.to(NPU), 48, return_complex=True, window=torch.ones(48, dtype=torch.half, device=NPU))
