"""Real npu outputs have the strides FakeTensor predicts for them.

Compiled graphs are planned from fake tensors: Inductor allocates, reuses and asserts
(``assert_size_stride``) buffers by the fake rule's strides, so an npu kernel whose output
layout differs from its fake rule breaks compiled code. The npu kernels run cpu kernels,
whose layout choices follow cpu's backends; where the fake rule asks which backend serves
the device (convolution: Overrideable for npu, Mkldnn for cpu) the npu kernel must follow
the npu answer. Channels-last inputs are what Inductor's layout optimisation feeds convs.
"""
import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_npu  # noqa: F401  (registers the npu device)

CL = torch.channels_last
CL3D = torch.channels_last_3d


def _significant_strides(t: torch.Tensor) -> list[int]:
    # Strides of size-1 dimensions carry no layout (Inductor's asserts skip them too).
    return [st for st, size in zip(t.stride(), t.shape) if size > 1]


def _assert_real_matches_fake(fn, *tensors):
    real = fn(*tensors)
    with FakeTensorMode() as mode:
        fake = fn(*(mode.from_tensor(t) for t in tensors))
    real = real if isinstance(real, tuple) else (real,)
    fake = fake if isinstance(fake, tuple) else (fake,)
    for r, f in zip(real, fake):
        if r is None:
            assert f is None
            continue
        assert r.device.type == "npu"
        assert r.shape == f.shape
        assert _significant_strides(r) == _significant_strides(f), (r.stride(), f.stride())


CONV_CASES = [
    pytest.param((2, 3, 8, 8), CL, (4, 3, 3, 3), None, {}, id="2d_channels_last_input"),
    pytest.param((2, 3, 8, 8), None, (4, 3, 3, 3), CL, {}, id="2d_channels_last_weight"),
    pytest.param((2, 4, 8, 8), CL, (4, 1, 3, 3), CL, {"groups": 4}, id="2d_depthwise_channels_last"),
    pytest.param((2, 3, 8, 8), CL, (4, 3, 1, 1), None, {"stride": 2}, id="2d_pointwise_strided"),
    pytest.param((2, 3, 6, 6, 6), CL3D, (4, 3, 3, 3, 3), None, {}, id="3d_channels_last"),
    pytest.param((2, 3, 9), None, (4, 3, 3), None, {"padding": 1}, id="1d"),
    pytest.param((2, 3, 8, 8), None, (4, 3, 3, 3), None, {}, id="2d_contiguous"),
]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("in_shape, in_fmt, w_shape, w_fmt, kwargs", CONV_CASES)
def test_convolution_forward_and_backward_strides_follow_fake_rule(in_shape, in_fmt, w_shape, w_fmt, kwargs, bias):
    x = torch.randn(in_shape, device="npu")
    w = torch.randn(w_shape, device="npu")
    if in_fmt is not None:
        x = x.contiguous(memory_format=in_fmt)
    if w_fmt is not None:
        w = w.contiguous(memory_format=w_fmt)
    b = torch.randn(w_shape[0], device="npu") if bias else None
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(in_shape)]

    def forward(x, w, *b):
        return conv(x, w, b[0] if b else None, **kwargs)

    _assert_real_matches_fake(forward, x, w, *([b] if bias else []))
    out = forward(x, w, *([b] if bias else []))
    grad = torch.randn_like(out).contiguous(memory_format=in_fmt or torch.contiguous_format) if out.dim() > 3 else torch.randn_like(out)

    def backward(grad, x, w):
        return torch.ops.aten.convolution_backward(
            grad, x, w, [w.shape[0]] if bias else None,
            [kwargs.get("stride", 1)] * (x.dim() - 2), [kwargs.get("padding", 0)] * (x.dim() - 2),
            [1] * (x.dim() - 2), False, [0] * (x.dim() - 2), kwargs.get("groups", 1), [True, True, bias],
        )

    _assert_real_matches_fake(backward, grad, x, w)


def test_transposed_convolution_strides_follow_fake_rule():
    x = torch.randn(2, 4, 5, 5, device="npu").contiguous(memory_format=CL)
    w = torch.randn(4, 3, 3, 3, device="npu")
    _assert_real_matches_fake(lambda x, w: F.conv_transpose2d(x, w, stride=2), x, w)


def test_convolution_values_match_cpu_whatever_the_layout():
    x = torch.randn(2, 3, 8, 8).contiguous(memory_format=CL)
    w = torch.randn(4, 3, 3, 3)
    torch.testing.assert_close(F.conv2d(x.npu(), w.npu()).cpu(), F.conv2d(x, w))
