"""Sends every ``"cuda"`` device argument to npu where c10 dispatches it: no patch, no mode.

A CPU build of PyTorch parses ``"cuda"``, ``"cuda:N"`` and ``torch.device("cuda")`` into a
CUDA device and routes a factory with that device to the CUDA dispatch key, under a CUDA
device guard, after asking ``torch.cuda`` to initialise. ``_C._cuda_as_npu_enable()`` fills
the three registration points for that (``torch_npu/csrc/cuda_as_npu/cuda_as_npu.cpp``): a boxed
dispatcher fallback for the CUDA key that rewrites the call's cuda devices to npu and calls
the operator again, a CUDA device-guard implementation that forwards to npu's, and CUDA
marked as initialised for the bindings' lazy initialisation. So ``torch.zeros(...,
device="cuda")``, ``torch.tensor(..., device="cuda")``, ``new_*``, ``Tensor.to("cuda")``,
``Tensor.cuda()`` (hence ``nn.Module.cuda()``/``.to("cuda")``), ``torch.set_default_device
("cuda")`` make npu tensors, in every thread and in autograd's, while a call with no cuda
device (``a + b``) never reaches any of it: it costs nothing.

It does not reach code Dynamo traces (fake tensors are made above the dispatcher): that
is ``device_mode``'s part.
"""
from __future__ import annotations

import torch_npu._C as _C


def install() -> None:
    _C._cuda_as_npu_enable()


def uninstall() -> None:
    _C._cuda_as_npu_disable()


def installed() -> bool:
    return _C._cuda_as_npu_enabled()
