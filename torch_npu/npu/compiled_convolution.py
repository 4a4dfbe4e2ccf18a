"""The convolution compiled npu code calls, bound straight to the runtime.

Inductor's npu post-grad pass gives convolutions cpu's plan: the runtime's
``npu::_convolution_host_layout`` (the CPU kernel's output in the layout it writes, the bias
passed in). Through ``torch.ops`` each call pays the boxed argument conversion and the
dispatcher, a few microseconds that cpu's compiled code, calling ``torch.convolution``, does
not pay. ``_convolution_host_layout(input, weight, bias, stride, padding, dilation,
transposed, output_padding, groups)`` is the same npu kernel as a fastcall C function;
compiled code runs outside autograd, so nothing the dispatcher adds is missed.
"""
from __future__ import annotations

import torch_npu._C as _C

_convolution_host_layout = _C._convolution_host_layout

__all__: list[str] = []
