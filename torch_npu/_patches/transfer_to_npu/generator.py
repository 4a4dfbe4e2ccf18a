"""Lets ``torch.Generator("cuda")`` make an npu generator: one patch site, ``torch.Generator``.

Missing extension point: ``torch.Generator`` is a C type, and constructing it is not a torch
function, so the device mode never sees ``torch.Generator(device="cuda")``; PyTorch offers no
hook on generator construction.

``apply()`` binds ``torch.Generator`` to a subclass of the C type whose constructor maps a
cuda device to npu. Its metaclass keeps ``isinstance(g, torch.Generator)`` true for every
generator (``torch.default_generator``, npu default generators, generators made before the
import), and the objects it makes are ordinary generators to every C++ function.

Delete when device-argument rewriting reaches type constructors.
"""
from __future__ import annotations

import torch

_original: type | None = None


def _npu_device(device):
    if isinstance(device, str) and (device == "cuda" or device.startswith("cuda:")):
        return "npu" + device[4:]
    if isinstance(device, torch.device) and device.type == "cuda":
        return torch.device("npu", device.index)
    return device


def _make_generator_class(base: type) -> type:
    class _GeneratorType(type(base)):
        def __instancecheck__(cls, instance) -> bool:
            return isinstance(instance, base)

        def __subclasscheck__(cls, subclass) -> bool:
            return issubclass(subclass, base)

    class Generator(base, metaclass=_GeneratorType):
        __doc__ = base.__doc__

        def __new__(cls, device="cpu"):
            return base.__new__(cls, device=_npu_device(device))

    Generator.__module__ = "torch"
    Generator.__qualname__ = "Generator"
    return Generator


def apply() -> None:
    global _original
    if _original is not None:
        return
    _original = torch.Generator
    torch.Generator = _make_generator_class(torch._C.Generator)


def revert() -> None:
    global _original
    if _original is None:
        return
    torch.Generator = _original
    _original = None


def sites() -> tuple[str, ...]:
    return ("torch.Generator",)
