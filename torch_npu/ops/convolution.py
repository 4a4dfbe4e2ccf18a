"""Convolutions as Ascend code calls them: ``npu_conv3d`` and ``npu_deformable_conv2d``
(mmcv's ``ModulatedDeformConv2d`` calls it on Ascend), each with its backward.

Semantics (Ascend documentation):

* ``npu_conv3d(input, weight, bias, stride, padding, dilation, groups)``: ``F.conv3d``;
  backward ``npu_conv3d_backward(input, grad, weight, ..., output_mask)`` returns the
  gradients of input, weight and bias that ``output_mask`` asks for.
* ``npu_deformable_conv2d(self, weight, offset, bias, kernel_size, stride, padding, dilation,
  groups, deformable_groups, modulated)``: ``stride``/``dilation`` are NCHW 4-lists,
  ``padding`` is ``[top, bottom, left, right]``. For output point ``(oh, ow)`` and kernel point
  ``k = (kh, kw)`` the sampling point is ``y = oh * stride_h - top + kh * dilation_h + dy``,
  ``x = ow * stride_w - left + kw * dilation_w + dx`` with the offsets of channel block
  ``[dx for every (group, k)] + [dy ...] + [mask ...]`` (the mask block only when
  ``modulated``; ``offset`` has ``deformable_groups * K * 3`` or ``* 2`` channels, index
  ``group * K + k``). The input is read there by bilinear interpolation (points outside count
  as zero, as mmcv and torchvision sample), times the mask, giving ``deformable_offset`` of
  shape ``(N, C, out_h * K_H, out_w * K_W)``; the result is its convolution with ``weight``
  at stride ``(K_H, K_W)``, plus ``bias``. Everything is float32, as on Ascend. The backward
  (``npu_deformable_conv2dbk``) is the exact gradient of this formula for input, weight,
  offset and bias (``_formula_backward``).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._formula_backward import vjp
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_conv3d", "npu_deformable_conv2d"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions


# --- npu_conv3d ----------------------------------------------------------------------------

def _check_conv3d_args(x, weight, bias, stride, padding, dilation, groups) -> None:
    op = "npu_conv3d"
    check.tensor(op, "input", x)
    check.tensor(op, "weight", weight)
    check.dtype(op, "input", x, check.FLOATING)
    check.same_dtype(op, "weight", weight, "input", x)
    check.rank(op, "input", x, (5,))
    check.rank(op, "weight", weight, (5,))
    for name, value in (("stride", stride), ("padding", padding), ("dilation", dilation)):
        if len(value) != 3:
            raise ValueError(f"{op}: {name} must have 3 values (depth, height, width), got {list(value)}")
    if groups <= 0 or x.shape[1] % groups or weight.shape[1] * groups != x.shape[1]:
        raise ValueError(
            f"{op}: groups={groups} does not fit input channels {x.shape[1]} and weight of shape {tuple(weight.shape)} "
            "(weight is (out_channels, in_channels / groups, kT, kH, kW))"
        )
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"{op}: bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}")


def _conv3d(input, weight, bias, stride, padding, dilation, groups):
    _check_conv3d_args(input, weight, bias, stride, padding, dilation, groups)
    return F.conv3d(input, weight, bias, stride, padding, dilation, groups)


def _conv3d_fake(input, weight, bias, stride, padding, dilation, groups):
    _check_conv3d_args(input, weight, bias, stride, padding, dilation, groups)
    spatial = [
        (size + 2 * p - d * (k - 1) - 1) // s + 1
        for size, k, s, p, d in zip(input.shape[2:], weight.shape[2:], stride, padding, dilation)
    ]
    return input.new_empty((input.shape[0], weight.shape[0], *spatial))


def _conv3d_backward(input, grad, weight, stride, padding, dilation, groups, output_mask):
    grad_input, grad_weight, grad_bias = torch.ops.aten.convolution_backward(
        grad, input, weight, [weight.shape[0]], stride, padding, dilation, False, [0, 0, 0], groups, list(output_mask)
    )
    return (
        grad_input if output_mask[0] else input.new_zeros(input.shape),
        grad_weight if output_mask[1] else weight.new_zeros(weight.shape),
        grad_bias if output_mask[2] else weight.new_zeros((weight.shape[0],)),
    )


def _conv3d_backward_fake(input, grad, weight, stride, padding, dilation, groups, output_mask):
    return input.new_empty(input.shape), weight.new_empty(weight.shape), weight.new_empty((weight.shape[0],))


def _conv3d_setup_context(ctx, inputs, output) -> None:
    input, weight, bias, stride, padding, dilation, groups = inputs
    ctx.options = (stride, padding, dilation, groups)
    ctx.has_bias = bias is not None
    ctx.save_for_backward(input, weight)


def _conv3d_autograd(ctx, grad):
    input, weight = ctx.saved_tensors
    mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.has_bias and ctx.needs_input_grad[2]]
    gi, gw, gb = torch.ops.npu.npu_conv3d_backward(input, grad, weight, *ctx.options, mask)
    return (gi if mask[0] else None, gw if mask[1] else None, gb if mask[2] else None, None, None, None, None)


_family.define(
    "npu_conv3d(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, int groups) -> Tensor",
    kernel=_conv3d, fake=_conv3d_fake, backward=_conv3d_autograd, setup_context=_conv3d_setup_context,
)
_family.define(
    "npu_conv3d_backward(Tensor input, Tensor grad, Tensor weight, int[] stride, int[] padding, int[] dilation, "
    "int groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    kernel=_conv3d_backward, fake=_conv3d_backward_fake,
)


def npu_conv3d(input_, weight, bias, stride, padding, dilation, groups):
    """``torch.ops.npu.npu_conv3d`` under the Python signature Ascend exports."""
    return torch.ops.npu.npu_conv3d(input_, weight, bias, stride, padding, dilation, groups)


# --- npu_deformable_conv2d -----------------------------------------------------------------

def _deformable_geometry(x, weight, offset, bias, kernel_size, stride, padding, dilation, groups,
                         deformable_groups, modulated):
    op = "npu_deformable_conv2d"
    for name, value in (("self", x), ("weight", weight), ("offset", offset)):
        check.tensor(op, name, value)
        check.dtype(op, name, value, check.FLOATING)
        check.rank(op, name, value, (4,))
    if len(kernel_size) != 2 or len(stride) != 4 or len(padding) != 4 or len(dilation) != 4:
        raise ValueError(
            f"{op}: kernel_size must have 2 values and stride, padding, dilation 4 (NCHW; padding "
            f"top, bottom, left, right), got {list(kernel_size)}, {list(stride)}, {list(padding)}, {list(dilation)}"
        )
    kh, kw = kernel_size
    n, c, h, w = x.shape
    if tuple(weight.shape[2:]) != (kh, kw) or groups <= 0 or c % groups or weight.shape[1] * groups != c:
        raise ValueError(
            f"{op}: weight of shape {tuple(weight.shape)} must be (out_channels, in_channels / groups, "
            f"{kh}, {kw}) for {c} input channels and groups={groups}"
        )
    if deformable_groups <= 0 or c % deformable_groups:
        raise ValueError(f"{op}: deformable_groups={deformable_groups} must be positive and divide the {c} input channels")
    out_h = (h + padding[0] + padding[1] - ((kh - 1) * dilation[2] + 1)) // stride[2] + 1
    out_w = (w + padding[2] + padding[3] - ((kw - 1) * dilation[3] + 1)) // stride[3] + 1
    expected = (n, deformable_groups * kh * kw * (3 if modulated else 2), out_h, out_w)
    if tuple(offset.shape) != expected:
        raise ValueError(f"{op}: offset must have shape {expected}, got {tuple(offset.shape)}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"{op}: bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}")
    return out_h, out_w


def _bilinear(image, y, x):
    """``image`` (N, G, Cg, H, W) read at float positions ``y``, ``x`` (N, G, P); zero outside."""
    n, g, cg, h, w = image.shape
    y0, x0 = torch.floor(y), torch.floor(x)
    flat = image.reshape(n, g, cg, h * w)
    out = 0
    for dy in (0, 1):
        for dx in (0, 1):
            yy, xx = y0 + dy, x0 + dx
            weight = (1 - (y - yy).abs()) * (1 - (x - xx).abs())
            inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            index = (yy.clamp(0, h - 1) * w + xx.clamp(0, w - 1)).long()
            values = torch.gather(flat, 3, index.unsqueeze(2).expand(n, g, cg, index.shape[-1]))
            out = out + values * (weight * inside).unsqueeze(2)
    return out  # (N, G, Cg, P)


def _deformable_formula(x, weight, offset, bias, kernel_size, stride, padding, dilation, groups,
                        deformable_groups, modulated, out_h, out_w):
    n, c, h, w = x.shape
    kh, kw = kernel_size
    k = kh * kw
    dg = deformable_groups
    blocks = offset.reshape(n, 3 if modulated else 2, dg, k, out_h, out_w)
    dx, dy = blocks[:, 0], blocks[:, 1]
    mask = blocks[:, 2] if modulated else None
    base_y = (torch.arange(out_h, device=x.device) * stride[2] - padding[0]).view(1, 1, 1, out_h, 1)
    base_x = (torch.arange(out_w, device=x.device) * stride[3] - padding[2]).view(1, 1, 1, 1, out_w)
    ky = (torch.arange(kh, device=x.device) * dilation[2]).repeat_interleave(kw).view(1, 1, k, 1, 1)
    kx = (torch.arange(kw, device=x.device) * dilation[3]).repeat(kh).view(1, 1, k, 1, 1)
    y = (base_y + ky + dy).reshape(n, dg, -1)
    xs = (base_x + kx + dx).reshape(n, dg, -1)
    sampled = _bilinear(x.reshape(n, dg, c // dg, h, w), y, xs)  # (N, dg, Cg, K*oh*ow)
    if mask is not None:
        sampled = sampled * mask.reshape(n, dg, 1, -1)
    # (N, C, K_H, K_W, oh, ow) -> (N, C, oh * K_H, ow * K_W): each output point's K_H x K_W patch
    patches = sampled.reshape(n, c, kh, kw, out_h, out_w).permute(0, 1, 4, 2, 5, 3)
    deform_out = patches.reshape(n, c, out_h * kh, out_w * kw)
    out = F.conv2d(deform_out, weight, bias, stride=(kh, kw), groups=groups)
    return out, deform_out


def _deformable_conv2d(self, weight, offset, bias, kernel_size, stride, padding, dilation=(1, 1, 1, 1),
                       groups=1, deformable_groups=1, modulated=True):
    out_h, out_w = _deformable_geometry(self, weight, offset, bias, kernel_size, stride, padding, dilation, groups,
                                        deformable_groups, modulated)
    out, deform_out = _deformable_formula(
        self.float(), weight.float(), offset.float(), None if bias is None else bias.float(), kernel_size, stride,
        padding, dilation, groups, deformable_groups, modulated, out_h, out_w)
    return out, deform_out


def _deformable_conv2d_fake(self, weight, offset, bias, kernel_size, stride, padding, dilation=(1, 1, 1, 1),
                            groups=1, deformable_groups=1, modulated=True):
    out_h, out_w = _deformable_geometry(self, weight, offset, bias, kernel_size, stride, padding, dilation, groups,
                                        deformable_groups, modulated)
    n, c = self.shape[:2]
    kh, kw = kernel_size
    return (
        self.new_empty((n, weight.shape[0], out_h, out_w), dtype=torch.float32),
        self.new_empty((n, c, out_h * kh, out_w * kw), dtype=torch.float32),
    )


def _deformable_backward(input, grad_output, offset_out, weight, offset, kernel_size, stride, padding,
                         dilation=(1, 1, 1, 1), groups=1, deformable_groups=1, modulated=True):
    out_h, out_w = _deformable_geometry(input, weight, offset, None, kernel_size, stride, padding, dilation, groups,
                                        deformable_groups, modulated)
    bias = weight.new_zeros((weight.shape[0],))

    def formula(x, w, o, b):
        return _deformable_formula(x, w, o, b, kernel_size, stride, padding, dilation, groups, deformable_groups,
                                   modulated, out_h, out_w)[0]

    return vjp(formula, (input, weight, offset, bias), grad_output)


def _deformable_backward_fake(input, grad_output, offset_out, weight, offset, kernel_size, stride, padding,
                              dilation=(1, 1, 1, 1), groups=1, deformable_groups=1, modulated=True):
    return (input.new_empty(input.shape), weight.new_empty(weight.shape), offset.new_empty(offset.shape),
            weight.new_empty((weight.shape[0],)))


def _deformable_setup_context(ctx, inputs, output) -> None:
    self, weight, offset, bias = inputs[:4]
    ctx.options = inputs[4:]
    ctx.has_bias = bias is not None
    ctx.save_for_backward(self, weight, offset, output[1])


def _deformable_autograd(ctx, grad, _grad_offset_out):
    self, weight, offset, offset_out = ctx.saved_tensors
    gi, gw, go, gb = torch.ops.npu.npu_deformable_conv2dbk(self, grad, offset_out, weight, offset, *ctx.options)
    return (gi, gw, go, gb if ctx.has_bias else None) + (None,) * 7


_family.define(
    "npu_deformable_conv2d(Tensor inputs, Tensor weight, Tensor offset, Tensor? bias, int[2] kernel_size, int[] stride, "
    "int[] padding, int[4] dilation=[1,1,1,1], int groups=1, int deformable_groups=1, bool modulated=True) "
    "-> (Tensor, Tensor)",
    kernel=_deformable_conv2d, fake=_deformable_conv2d_fake, backward=_deformable_autograd,
    setup_context=_deformable_setup_context,
)
_family.define(
    "npu_deformable_conv2dbk(Tensor input, Tensor grad_output, Tensor offset_out, Tensor weight, Tensor offset, "
    "int[2] kernel_size, int[] stride, int[] padding, int[4] dilation=[1,1,1,1], int groups=1, "
    "int deformable_groups=1, bool modulated=True) -> (Tensor, Tensor, Tensor, Tensor)",
    kernel=_deformable_backward, fake=_deformable_backward_fake,
)

npu_deformable_conv2d = torch.ops.npu.npu_deformable_conv2d
