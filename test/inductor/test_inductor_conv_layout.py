"""Convolutions of compiled npu graphs: cpu's layout, cpu's bias handling, cpu's numbers.

With layout optimisation Inductor feeds convolutions channels-last inputs and asserts the
layout of every conv output (``assert_size_stride``). npu's post-grad pass gives npu
convolutions the layout and bias handling Inductor gives cpu ones (``conv_host_layout``):
``npu::_convolution_host_layout`` returns the CPU kernel's output unconverted, its fake
kernel gives the strides FakeTensor's cpu rule gives. The same kernels then run in the same
order on the same layouts, so the compiled npu results are bit-equal to the compiled cpu
ones (before, npu converted each conv output to contiguous and added the bias in the next
kernel: results differed in the last bits).
"""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_npu  # noqa: E402  (a missing package is a failure, not a skip)
from torch_npu.compiler.inductor import conv_host_layout

from inductor_models import NPU, SmallCNN, assert_forward_backward_matches_cpu  # noqa: E402

HOST_LAYOUT_CALL = "npu_convolution_host_layout("
# assert_size_stride(buf2, (4, 8, 32, 32), (8192, 1, 256, 8), 'torch.ops.aten.convolution.default')
CONV_OUTPUT_ASSERT = re.compile(
    r"assert_size_stride\(\w+, (\([^)]*\)), (\([^)]*\)), '(?:torch\.ops\.aten\.convolution|"
    r"torch\.ops\.npu\._convolution_host_layout)\.default'\)")


@pytest.mark.parametrize("npu_backend", ["default", "mlir"])
def test_small_cnn_with_forced_layout_optimization_matches_cpu(npu_backend):
    if npu_backend == "mlir":
        pytest.importorskip("torch_mlir")
    options = {"npu_backend": npu_backend, "force_layout_optimization": True}
    assert_forward_backward_matches_cpu(
        SmallCNN,
        lambda: torch.randn(4, 3, 16, 16),
        lambda model: torch.compile(model, backend="inductor", options=options),
        grad_rtol=1e-3,
    )


def _compiled_on(device, model, *inputs):
    """The compiled output on ``device`` (on cpu) and the generated code of the graph."""
    compiled = torch.compile(model.to(device), backend="inductor")
    with torch.no_grad():
        out, code = run_and_get_code(compiled, *(t.to(device) for t in inputs))
    return out, "\n".join(code)


def test_compiled_cnn_is_bit_equal_to_compiled_cpu_with_cpu_conv_layouts():
    torch.manual_seed(0)
    model = SmallCNN().eval()
    x = torch.randn(4, 3, 16, 16)
    cpu_out, cpu_code = _compiled_on("cpu", model, x)
    torch._dynamo.reset()
    npu_out, npu_code = _compiled_on(NPU, model, x)

    assert npu_out.device.type == "npu"
    assert torch.equal(npu_out.cpu(), cpu_out)
    # Every convolution is the cpu-layout op, with the bias passed in (none added after).
    assert npu_code.count(HOST_LAYOUT_CALL) == 2
    assert "extern_kernels.convolution(" not in npu_code
    assert ", bias=None)" not in npu_code
    # Its output layouts are the ones compiled cpu asserts for its convolutions.
    cpu_layouts = CONV_OUTPUT_ASSERT.findall(cpu_code)
    assert len(cpu_layouts) == 2 and cpu_layouts[0][1].split(", ")[1] == "1"  # channels-last
    assert CONV_OUTPUT_ASSERT.findall(npu_code) == cpu_layouts


def test_graph_outputs_keep_eager_strides_and_conv1d_follows_cpu():
    # A conv output that is a graph output keeps eager's strides (eager npu: contiguous
    # here); a 1-d convolution takes the stride order of cpu's output.
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 4, 8, 8), torch.randn(6, 4, 3, 3), torch.randn(6)
    s, w1 = torch.randn(2, 4, 12), torch.randn(5, 4, 3)

    def convs(x, w, b, s, w1):
        return F.conv2d(x, w, b, padding=1), F.conv1d(s, w1, stride=2)

    class Convs(torch.nn.Module):
        def forward(self, *args):
            return convs(*args)

    cpu_out, _ = _compiled_on("cpu", Convs(), x, w, b, s, w1)
    torch._dynamo.reset()
    npu_out, npu_code = _compiled_on(NPU, Convs(), x, w, b, s, w1)
    eager_npu = convs(*(t.to(NPU) for t in (x, w, b, s, w1)))
    assert npu_code.count(HOST_LAYOUT_CALL) == 2
    for compiled, expected, eager in zip(npu_out, cpu_out, eager_npu):
        assert torch.equal(compiled.cpu(), expected)
        assert compiled.stride() == eager.stride()


CASES = {
    "channels-last 2-d": ((4, 3, 10, 10), (8, 3, 3, 3), True, torch.float32, dict(padding=(1, 1))),
    "contiguous 2-d, no bias": ((2, 4, 9, 9), (6, 4, 3, 3), False, torch.float32, dict(stride=(2, 2))),
    "channels-last float64 (thnn)": ((2, 3, 7, 7), (4, 3, 3, 3), True, torch.float64, dict()),
    "1-d": ((2, 4, 12), (5, 4, 3), False, torch.float32, dict(padding=(1,))),
    "grouped 2-d": ((2, 4, 8, 8), (4, 2, 3, 3), True, torch.float32, dict(groups=2)),
    "transposed 2-d": ((2, 4, 5, 5), (4, 3, 3, 3), True, torch.float32, dict(transposed=True)),
}


def _conv_args(weight_dim, stride=None, padding=None, groups=1, transposed=False):
    n = weight_dim - 2
    return ((list(stride) if stride else [1] * n), (list(padding) if padding else [0] * n), [1] * n, transposed,
            [0] * n, groups)


def _case_inputs(case, seed):
    """Input, weight, bias (None for the case without) and the remaining arguments of ``case``."""
    in_shape, w_shape, channels_last, dtype, kwargs = CASES[case]
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(in_shape, generator=g, dtype=dtype), torch.randn(w_shape, generator=g, dtype=dtype)
    if channels_last:
        x, w = x.contiguous(memory_format=torch.channels_last), w.contiguous(memory_format=torch.channels_last)
    out_channels = w_shape[1] * kwargs.get("groups", 1) if kwargs.get("transposed") else w_shape[0]
    b = torch.randn(out_channels, generator=g, dtype=dtype) if case != "contiguous 2-d, no bias" else None
    return x, w, b, _conv_args(len(w_shape), **kwargs)


@pytest.mark.parametrize("case", list(CASES))
def test_host_layout_op_equals_cpu_convolution_and_its_fake_strides(case):
    x, w, b, args = _case_inputs(case, seed=0)
    op = conv_host_layout.host_layout_op()

    expected = torch.ops.aten.convolution(x, w, b, *args)
    actual = op(x.to(NPU), w.to(NPU), None if b is None else b.to(NPU), *args)
    # The CPU kernel's output as it wrote it: cpu eager's values and strides.
    assert actual.device.type == "npu"
    assert torch.equal(actual.cpu(), expected)
    assert actual.stride() == expected.stride()
    mode = FakeTensorMode()
    fakes = [None if t is None else mode.from_tensor(t.to(NPU)) for t in (x, w, b)]
    with mode:
        fake = op(*fakes, *args)
    assert fake.device.type == "npu"
    assert fake.shape == actual.shape and fake.stride() == actual.stride()
    # The entry point compiled code calls is the same kernel.
    direct = torch.npu._convolution_host_layout(x.to(NPU), w.to(NPU), None if b is None else b.to(NPU), *args)
    assert torch.equal(direct.cpu(), expected) and direct.stride() == expected.stride()


@pytest.mark.parametrize("case", ["channels-last 2-d", "1-d", "channels-last float64 (thnn)"])
def test_host_layout_op_captured_in_an_npu_graph_has_the_cpu_kernels_strides(case):
    # Captured, the output is allocated before the kernel runs, from the backend rule asked
    # for cpu: it must be the layout the replayed CPU kernel writes.
    x, w, b, args = _case_inputs(case, seed=1)
    in_shape, _, channels_last, dtype, _ = CASES[case]
    g = torch.Generator().manual_seed(2)
    op = conv_host_layout.host_layout_op()
    xn, wn, bn = x.to(NPU), w.to(NPU), b.to(NPU)
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        out = op(xn, wn, bn, *args)
    new = torch.randn(in_shape, generator=g, dtype=dtype)
    xn.copy_(new.to(NPU))
    graph.replay()
    expected = torch.ops.aten.convolution(new.to(memory_format=torch.channels_last) if channels_last else new, w, b, *args)
    assert out.stride() == expected.stride()
    assert torch.equal(out.cpu(), expected)


def test_convolution_entry_point_rejects_bad_arguments_clearly():
    x, w = torch.randn(1, 2, 4, 4), torch.randn(3, 2, 3, 3)
    args = _conv_args(4)
    with pytest.raises(TypeError, match=r"stride, padding, dilation and output_padding lists of ints"):
        torch.npu._convolution_host_layout(x.to(NPU), w.to(NPU), None, 1, *args[1:])
    with pytest.raises(RuntimeError, match="expected npu tensors, got one on cpu"):
        torch.npu._convolution_host_layout(x, w, None, *args)


def test_entry_point_layout_follows_each_geometry_and_setting_called_in_turn():
    # The layout each run converts its output to is remembered per geometry: geometries
    # differing only in strides, dtype or parameters, called in turn, each keep cpu's layout,
    # and so do calls under another oneDNN setting or thread count (global state ATen's
    # backend rule reads).
    calls = []
    for case in ("channels-last 2-d", "contiguous 2-d, no bias", "channels-last float64 (thnn)", "1-d"):
        x, w, b, args = _case_inputs(case, seed=3)
        calls.append((x, w, b, args))
        if x.dim() == 4:  # the same sizes in the other layout
            other = torch.contiguous_format if x.is_contiguous(memory_format=torch.channels_last) else torch.channels_last
            calls.append((x.contiguous(memory_format=other), w.contiguous(memory_format=other), b, args))
    settings = [(True, 1), (False, 1), (True, 2)]
    threads = torch.get_num_threads()
    try:
        for _ in range(2):
            for mkldnn, num_threads in settings:
                torch.set_num_threads(num_threads)
                with torch.backends.mkldnn.flags(enabled=mkldnn):
                    for x, w, b, args in calls:
                        expected = torch.convolution(x, w, b, *args)
                        actual = torch.npu._convolution_host_layout(
                            x.to(NPU), w.to(NPU), None if b is None else b.to(NPU), *args)
                        assert actual.stride() == expected.stride(), (x.shape, x.stride(), mkldnn, num_threads)
                        assert torch.equal(actual.cpu(), expected)
    finally:
        torch.set_num_threads(threads)
