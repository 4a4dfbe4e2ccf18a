"""``torch.npu.amp.autocast_mode``: the npu autocast entry point and the thread's autocast state.

``autocast`` is a factory that returns a real ``torch.autocast("npu", ...)`` rather than a
subclass: Dynamo and ``torch.export`` recognise ``torch.autocast`` itself and keep it as
an autocast region in the graph, which they do not do for subclasses. The autocast
kernels are registered by the runtime under ``AutocastPrivateUse1``.
"""
from __future__ import annotations

import torch

__all__ = [
    "autocast",
    "get_amp_supported_dtype",
    "is_bf16_supported",
    "custom_fwd",
    "custom_bwd",
    "is_autocast_enabled",
    "set_autocast_enabled",
    "get_autocast_dtype",
    "set_autocast_dtype",
]

DEVICE_TYPE = "npu"


def get_amp_supported_dtype() -> list[torch.dtype]:
    """Lower-precision dtypes npu autocast can run ops in (asked by ``torch.autocast``)."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = False) -> bool:
    """Whether the device computes in bfloat16: True, except for a card without it
    (``TORCH_NPU_DEVICE_MODEL=Ascend310P*``)."""
    import torch_npu._C as _C

    return bool(_C._device_properties(-1)["bf16"])


def autocast(
    enabled: bool = True,
    dtype: torch.dtype = torch.float16,
    cache_enabled: bool = True,
) -> torch.autocast:
    """``torch.autocast("npu", ...)``; use as a context manager or a decorator.

    ``dtype`` defaults to float16, as for ``torch.cuda.amp.autocast`` and Ascend's
    ``torch.npu.amp.autocast``; ``dtype=None`` takes ``torch.get_autocast_dtype("npu")``.
    Unlike ``torch.autocast``, which warns and disables itself, an unsupported ``dtype``
    is an error here.
    """
    if dtype is not None and dtype not in get_amp_supported_dtype():
        supported = ", ".join(str(d) for d in get_amp_supported_dtype())
        raise ValueError(f"npu autocast does not support dtype {dtype}; supported: {supported}")
    return torch.autocast(DEVICE_TYPE, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def custom_fwd(fwd=None, *, cast_inputs: torch.dtype | None = None):
    """``torch.amp.custom_fwd`` for npu custom autograd functions."""
    return torch.amp.custom_fwd(fwd, device_type=DEVICE_TYPE, cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """``torch.amp.custom_bwd`` for npu custom autograd functions."""
    return torch.amp.custom_bwd(bwd, device_type=DEVICE_TYPE)


def is_autocast_enabled() -> bool:
    """Whether npu autocast is on in this thread (``torch.is_autocast_enabled("npu")``)."""
    return torch.is_autocast_enabled(DEVICE_TYPE)


def set_autocast_enabled(enable: bool) -> None:
    """Turn npu autocast on or off in this thread (``torch.set_autocast_enabled("npu", ...)``)."""
    torch.set_autocast_enabled(DEVICE_TYPE, enable)


def get_autocast_dtype() -> torch.dtype:
    """The dtype npu autocast casts to (``torch.get_autocast_dtype("npu")``)."""
    return torch.get_autocast_dtype(DEVICE_TYPE)


def set_autocast_dtype(dtype: torch.dtype) -> None:
    """Set the dtype npu autocast casts to (``torch.set_autocast_dtype("npu", ...)``)."""
    torch.set_autocast_dtype(DEVICE_TYPE, dtype)
