"""``ModulatedDeformConv`` (DCNv2, mmcv's ``ModulatedDeformConv2dPack``) over the fused
``torch_npu.npu_deformable_conv2d``.

mmcv lays the offsets out as ``(dy, dx)`` pairs per (deformable group, kernel point); Ascend's
operator wants all ``dx`` first, then all ``dy``, then the masks. ``sort_index_for_npu_fp``
reorders the offsets into that layout and ``sort_index_for_npu_bp`` puts their gradients back.
With ``pack=True`` the layer owns the ``conv_offset`` convolution that predicts offsets and
masks (initialised to zero, so a fresh layer is a plain convolution); with ``pack=False``
``forward`` takes ``(x, offset, mask)``.
"""
import math

import torch
from torch import nn
from torch.autograd import Function
from torch.nn.modules.utils import _pair

__all__ = ["ModulatedDeformConv", "ModulatedDeformConv2dFunction"]


def _geometry(stride, padding, dilation):
    sh, sw = _pair(stride)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    return [1, 1, sh, sw], [ph, ph, pw, pw], [1, 1, dh, dw]


class ModulatedDeformConv2dFunction(Function):
    """``forward(input, offset (mmcv layout), mask, weight, bias, with_bias, stride, padding,
    dilation, groups, deformable_groups, sort_index_for_npu_fp, sort_index_for_npu_bp)``:
    the modulated deformable convolution in float32; backward through
    ``npu_deformable_conv2dbk``."""

    @staticmethod
    def forward(ctx, input_tensor, offset_ori, mask, weight, bias=None, with_bias=False, stride=1, padding=0,
                dilation=1, groups=1, deformable_groups=1, sort_index_for_npu_fp=None, sort_index_for_npu_bp=None):
        import torch_npu

        if sort_index_for_npu_fp is None or sort_index_for_npu_bp is None:
            raise ValueError("ModulatedDeformConv2dFunction: sort_index_for_npu_fp and sort_index_for_npu_bp are "
                             "required (ModulatedDeformConv builds them)")
        input_tensor, offset_ori, mask, weight = (t.float() for t in (input_tensor, offset_ori, mask, weight))
        bias = None if bias is None or not with_bias else bias.float()
        strides, paddings, dilations = _geometry(stride, padding, dilation)
        offset_all = torch.cat([offset_ori.index_select(1, sort_index_for_npu_fp.long()), mask], dim=1)
        options = dict(kernel_size=list(weight.shape[2:]), stride=strides, padding=paddings, dilation=dilations,
                       groups=groups, deformable_groups=deformable_groups, modulated=True)
        output, offset_out = torch_npu.npu_deformable_conv2d(input_tensor, weight, offset_all, bias, **options)
        ctx.options = options
        ctx.with_bias = with_bias and bias is not None
        ctx.offset_channels = offset_ori.shape[1]
        ctx.save_for_backward(input_tensor, weight, offset_out, offset_all, sort_index_for_npu_bp)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input_tensor, weight, offset_out, offset_all, sort_index_for_npu_bp = ctx.saved_tensors
        o = ctx.options
        grad_input, grad_weight, grad_offset_all, grad_bias = torch.ops.npu.npu_deformable_conv2dbk(
            input_tensor, grad_output.float(), offset_out, weight, offset_all, o["kernel_size"], o["stride"],
            o["padding"], o["dilation"], o["groups"], o["deformable_groups"], o["modulated"])
        grad_offset = grad_offset_all.index_select(1, sort_index_for_npu_bp.long())
        grad_mask = grad_offset_all[:, ctx.offset_channels:]
        return (grad_input, grad_offset, grad_mask, grad_weight, grad_bias if ctx.with_bias else None,
                None, None, None, None, None, None, None, None)


class ModulatedDeformConv(nn.Module):
    """Modulated deformable 2-D convolution (float32), mmcv's arguments."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 deformable_groups=1, bias=True, pack=True):
        super().__init__()
        if in_channels % groups or out_channels % groups or in_channels % deformable_groups:
            raise ValueError(f"ModulatedDeformConv: groups={groups} must divide in_channels={in_channels} and "
                             f"out_channels={out_channels}, deformable_groups={deformable_groups} in_channels")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.groups = groups
        self.deformable_groups = deformable_groups
        self.with_bias = bias
        self.pack = pack
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels // groups, *self.kernel_size))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels))
        else:
            self.register_buffer("bias", torch.zeros(out_channels), persistent=False)
        if pack:
            self.conv_offset = nn.Conv2d(in_channels, deformable_groups * 3 * self.kernel_size[0] * self.kernel_size[1],
                                         kernel_size=self.kernel_size, stride=_pair(stride), padding=_pair(padding),
                                         dilation=_pair(dilation), bias=True)
        self.split_num = deformable_groups * 2 * self.kernel_size[0] * self.kernel_size[1]
        order = list(range(self.split_num))
        fp = order[1::2] + order[::2]  # the dx channels, then the dy channels
        back = [0] * self.split_num
        for position, channel in enumerate(fp):
            back[channel] = position
        self.register_buffer("sort_index_for_npu_fp", torch.tensor(fp, dtype=torch.int32), persistent=False)
        self.register_buffer("sort_index_for_npu_bp", torch.tensor(back, dtype=torch.int32), persistent=False)
        self.init_param()

    def init_param(self):
        """Uniform(+-1/sqrt(fan_in)) weight, zero bias; zero ``conv_offset`` (no deformation, mask 0.5)."""
        n = self.in_channels
        for k in self.kernel_size:
            n *= k
        stdv = 1.0 / math.sqrt(n)
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.zero_()
        if self.pack:
            self.conv_offset.weight.data.zero_()
            self.conv_offset.bias.data.zero_()

    def forward(self, x):
        if self.pack:
            out = self.conv_offset(x)
            offset = out[:, :self.split_num, ...]
            mask = torch.sigmoid(out[:, self.split_num:, ...])
        else:
            if not isinstance(x, (tuple, list)) or len(x) != 3:
                raise ValueError("ModulatedDeformConv(pack=False): forward takes (x, offset, mask)")
            x, offset, mask = x
        return ModulatedDeformConv2dFunction.apply(
            x, offset, mask, self.weight, self.bias, self.with_bias, self.stride, self.padding, self.dilation,
            self.groups, self.deformable_groups, self.sort_index_for_npu_fp, self.sort_index_for_npu_bp)
