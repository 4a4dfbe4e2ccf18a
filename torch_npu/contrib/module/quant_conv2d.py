"""``QuantConv2d``: int8 convolution with dequantisation, ``(conv(x, weight) + bias) * scale``.

Ascend computes it with its fused ``npu_quant_conv2d``; here the int8 x int8 products are
summed exactly (in float64, exact far beyond any int8 convolution's int32 range), the int32
``bias`` is added and the float32 per-channel ``scale`` applied once, rounding to
``output_dtype``. The padding is filled with ``offset_x`` (the input's zero point), as Ascend
documents. ``offset`` and ``round_mode`` are reserved by Ascend and unused.
"""
from typing import Union

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.utils import _pair
from torch.nn.parameter import Parameter

__all__ = ["QuantConv2d"]

_OUTPUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class QuantConv2d(nn.Module):
    """Args as ``nn.Conv2d`` plus ``output_dtype`` (float16 on Ascend; bfloat16 and float32
    accepted), ``offset_x`` (padding value), ``offset``/``round_mode`` (reserved). Parameters:
    ``weight`` int8 ``(out, in, kh, kw)``, ``scale`` float32 ``(out,)``, ``bias`` int32 ``(out,)``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, tuple[int, int]],
                 output_dtype: int, stride: Union[int, tuple[int, int]] = 1, padding: Union[int, tuple[int, int]] = 0,
                 dilation: Union[int, tuple[int, int]] = 1, groups: int = 1, bias: bool = True, offset: bool = False,
                 offset_x: int = 0, round_mode: str = 'rint', input_dtype: int = None, weight_dtype: int = None,
                 device=None, dtype=None) -> None:
        super().__init__()
        if output_dtype not in _OUTPUT_DTYPES:
            raise ValueError(f"QuantConv2d: output_dtype={output_dtype} is not supported; use one of {_OUTPUT_DTYPES}")
        if groups != 1:
            raise ValueError(f"QuantConv2d: groups={groups}; Ascend's quantised convolution supports groups=1 only")
        if round_mode != "rint":
            raise ValueError(f"QuantConv2d: round_mode={round_mode!r}; only 'rint' exists")
        if not -128 <= offset_x <= 127:
            raise ValueError(f"QuantConv2d: offset_x={offset_x} must be an int8 value (the input's padding value)")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = _pair(padding)
        self.dilation = _pair(dilation)
        self.groups = groups
        self.offset_x = offset_x
        self.round_mode = round_mode
        self.output_dtype = output_dtype
        self.input_dtype = input_dtype
        self.weight_dtype = weight_dtype
        self.weight = Parameter(torch.zeros((out_channels, in_channels, *self.kernel_size), dtype=torch.int8,
                                            device=device), False)
        self.scale = Parameter(torch.ones(out_channels, dtype=torch.float32, device=device), False)
        self.bias = Parameter(torch.zeros(out_channels, dtype=torch.int32, device=device), False) if bias else None
        self.offset = Parameter(torch.zeros(out_channels, dtype=torch.float32, device=device), False) if offset else None

    def forward(self, quant_conv2d_input: torch.Tensor) -> torch.Tensor:
        x = quant_conv2d_input
        if not isinstance(x, torch.Tensor) or x.dtype != torch.int8 or x.dim() != 4:
            raise TypeError("QuantConv2d: the input must be an int8 NCHW Tensor, got "
                            f"{(x.dtype, tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__}")
        if self.weight.dtype != torch.int8:
            raise TypeError(f"QuantConv2d: weight must be int8, got {self.weight.dtype}")
        if self.scale.dtype != torch.float32:
            raise TypeError(f"QuantConv2d: scale must be float32, got {self.scale.dtype} (the int64 form made by "
                            "npu_trans_quant_param is not read by the simulated npu; pass the float32 scale)")
        ph, pw = self.padding
        padded = F.pad(x.double(), (pw, pw, ph, ph), value=float(self.offset_x))
        acc = F.conv2d(padded, self.weight.double(), None, self.stride, 0, self.dilation, self.groups)
        if self.bias is not None:
            acc = acc + self.bias.double().view(1, -1, 1, 1)
        out = acc.float() * self.scale.view(1, -1, 1, 1)
        return out.to(self.output_dtype)
