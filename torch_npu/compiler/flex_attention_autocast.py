"""The autocast kernels of the FlexAttention higher-order ops for npu's autocast key.

``flex_attention`` and ``flex_attention_backward`` are higher-order ops; torch gives them
kernels for ``AutocastCPU``/``AutocastCUDA`` (and lets a few autocast keys fall through),
but none for ``AutocastPrivateUse1``. So inside ``torch.autocast("npu")`` every flex
attention call on npu tensors failed ("could not find kernel for HigherOrderOperator
flex_attention at dispatch key AutocastPrivateUse1"), eager and compiled alike (both trace
the op through Dynamo). These kernels are registered on npu's own key (``py_impl``):

* forward: query, key and value are cast to the region's autocast dtype (as torch's cpu and
  cuda kernels do), then the op runs again with npu's autocast key excluded;
* backward: runs again with the key excluded, unchanged: its inputs are the forward's
  tensors and their gradients, already in the dtypes the forward chose.

Registered by the compile trigger when ``torch.nn.attention.flex_attention`` is imported.
"""
from __future__ import annotations

from typing import Any

import torch

DEVICE_TYPE = "npu"


def _without_npu_autocast():  # noqa: ANN202 - a dispatch-key guard
    key = torch._C.DispatchKey.AutocastPrivateUse1
    return torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key))


def _cast(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # Autocast casts floating-point tensors of its device only (torch.amp's rule).
    if tensor.is_floating_point() and tensor.device.type == DEVICE_TYPE and tensor.dtype != dtype:
        return tensor.to(dtype)
    return tensor


def flex_attention_autocast(query, key, value, score_mod, block_mask, scale, kernel_options,  # noqa: ANN001, ANN201
                            score_mod_other_buffers=(), mask_mod_other_buffers=()):
    from torch._higher_order_ops.flex_attention import flex_attention

    dtype = torch.get_autocast_dtype(DEVICE_TYPE)
    query, key, value = (_cast(t, dtype) for t in (query, key, value))
    with _without_npu_autocast():
        return flex_attention(query, key, value, score_mod, block_mask, scale, kernel_options,
                              score_mod_other_buffers, mask_mod_other_buffers)


def flex_attention_backward_autocast(*args: Any, **kwargs: Any):  # noqa: ANN201
    from torch._higher_order_ops.flex_attention import flex_attention_backward

    with _without_npu_autocast():
        return flex_attention_backward(*args, **kwargs)


def is_registered() -> bool:
    from torch._higher_order_ops.flex_attention import flex_attention, flex_attention_backward

    key = torch._C.DispatchKey.AutocastPrivateUse1
    return (flex_attention.py_kernels.get(key) is flex_attention_autocast
            and flex_attention_backward.py_kernels.get(key) is flex_attention_backward_autocast)


def register() -> None:
    """Register both kernels on npu's autocast key, once."""
    from torch._higher_order_ops.flex_attention import flex_attention, flex_attention_backward

    key = torch._C.DispatchKey.AutocastPrivateUse1
    for hop, kernel in ((flex_attention, flex_attention_autocast),
                        (flex_attention_backward, flex_attention_backward_autocast)):
        if hop.py_kernels.get(key) is not kernel:
            hop.py_impl(key)(kernel)
