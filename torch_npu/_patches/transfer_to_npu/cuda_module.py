"""Makes ``torch.cuda``'s public API answer with ``torch.npu``'s: one patch site, the module's type.

Missing extension point: ``torch.cuda.is_available()``, ``torch.cuda.synchronize()``,
``torch.cuda.Event``/``Stream``/``CUDAGraph``, ``torch.cuda.manual_seed`` and the rest are
plain module attributes, not torch functions, so no TorchFunctionMode sees them, and PyTorch
has no way to point one device module at another.

Rather than replacing dozens of attributes, ``apply()`` sets the class of the ``torch.cuda``
module object to a ``types.ModuleType`` subclass whose ``__getattribute__`` serves the
redirected names (Python's documented way to customise a module's attribute access).
Redirected: every public function and class both modules have, and ``CUDAGraph`` as
``torch.npu.NPUGraph``; submodules (``torch.cuda.amp``, ...) and every other name (``nvtx``,
``jiterator``, ...) stay ``torch.cuda``'s own, as on a machine without CUDA (``torch.cuda.amp``'s
autocast and GradScaler reach npu through the device mode and the ``autocast``/``grad_scaler``
patches). Code that bound a name before the import keeps what it bound.

A cuda device given to a redirected function or class means the npu device of that index:
the parameters that take one are found by walking the signatures of ``torch.cuda``'s own
functions and classes (a parameter named ``device`` or ``*_device``), so every such function
accepts ``"cuda:0"``, ``torch.device("cuda", rank)`` and an index alike, and what torch.npu
refuses is what stays an error. A redirected class with such a parameter is served as a
subclass of torch.npu's that rewrites it, and ``isinstance`` answers as for torch.npu's class.

Whom npu serves is the rule of ``callers``: the script, its libraries, Dynamo and FX; PyTorch's
other modules keep the real CUDA answers. So a
redirected function is one forwarding function, the same object for every caller (Dynamo
guards on the identity of what it traced), that calls ``torch.npu``'s function, or the real
``torch.cuda`` one when the calling frame belongs to ``torch.*``; traced by Dynamo it always
calls ``torch.npu``'s. A redirected class cannot forward, so the class itself is chosen by
the frame that reads the attribute: ``torch.npu``'s for scripts, the real one for ``torch.*``.

Delete when PyTorch lets a script's device module be aliased to another accelerator's.
"""
from __future__ import annotations

import inspect
import sys
import types

import torch
import torch.cuda

from .callers import torch_internal
from .device_mode import _as_npu as npu_device

# torch.cuda name -> torch.npu name, besides the names both have.
ALIASES = {"CUDAGraph": "NPUGraph"}

_original_type: type | None = None


def _cuda_module() -> types.ModuleType:
    return torch.cuda


def redirected_names() -> dict[str, str]:
    """The torch.cuda names served by torch.npu, and the torch.npu name serving each."""
    npu, cuda = torch.npu, _cuda_module()
    public = getattr(npu, "__all__", [n for n in dir(npu) if not n.startswith("_")])
    names = {
        name: name
        for name in public
        # Submodules stay torch.cuda's: torch's own code reaches into them (for example
        # torch.cuda.amp.common), and what they export goes through the device mode.
        if not name.startswith("_")
        and hasattr(cuda, name)
        and not isinstance(getattr(cuda, name), types.ModuleType)
    }
    names.update({cuda: npu_name for cuda, npu_name in ALIASES.items() if hasattr(npu, npu_name)})
    return names


def device_parameters(function) -> tuple[tuple[int, str], ...]:
    """(position, name) of each parameter of ``function`` that takes a device.

    A keyword-only parameter gets position -1. Functions without a readable signature
    (C builtins) have none.
    """
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return ()
    found = []
    for position, parameter in enumerate(parameters):
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.name == "device" or parameter.name.endswith("_device"):
            keyword_only = parameter.kind is parameter.KEYWORD_ONLY
            found.append((-1 if keyword_only else position, parameter.name))
    return tuple(found)


def _npu_arguments(parameters, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with the cuda devices at ``parameters`` given as npu devices."""
    args = list(args)
    for position, name in parameters:
        if 0 <= position < len(args):
            args[position] = npu_device(args[position])
        elif name in kwargs:
            kwargs = {**kwargs, name: npu_device(kwargs[name])}
    return tuple(args), kwargs


def _forwarding_function(name: str, target: str, real):
    npu = torch.npu
    parameters = device_parameters(real)
    # False when run, a constant True where Dynamo traces it; unlike is_compiling(), it stays
    # False in the compiler's own code (Inductor asks torch.cuda things while compiling).
    traced_by_dynamo = torch.compiler.is_dynamo_compiling
    frame = sys._getframe

    def forward(*args, **kwargs):
        if traced_by_dynamo() or not torch_internal(frame(1)):
            if parameters and (args or kwargs):
                args, kwargs = _npu_arguments(parameters, args, kwargs)
            return getattr(npu, target)(*args, **kwargs)
        return real(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = getattr(getattr(npu, target), "__doc__", None)
    return forward


def _constructor_parameters(cls: type) -> tuple[tuple[int, str], ...]:
    """Device parameters of a class's constructor, ``self``/``cls`` not counted."""
    for constructor in (cls.__init__, cls.__new__):
        if constructor in (object.__init__, object.__new__):
            continue
        found = device_parameters(constructor)
        if found:
            return tuple((position - 1 if position > 0 else position, name) for position, name in found)
    return ()


def device_translating_class(served: type, real: type) -> type:
    """``served`` (a torch.npu class), taking cuda devices where ``real`` (torch.cuda's) takes a device.

    A subclass whose constructor rewrites those arguments; its metaclass makes
    ``isinstance``/``issubclass`` answer as for ``served``, so objects made by torch.npu
    (``torch.cuda.current_stream()``) are instances too. ``served`` itself when the class
    takes no device.
    """
    parameters = _constructor_parameters(real)
    if not parameters:
        return served

    class _ServedType(type(served)):
        def __instancecheck__(cls, instance) -> bool:
            return isinstance(instance, served)

        def __subclasscheck__(cls, subclass) -> bool:
            return issubclass(subclass, served)

    namespace: dict[str, object] = {"__doc__": served.__doc__, "__module__": served.__module__}
    if served.__new__ is not object.__new__:
        def __new__(cls, *args, **kwargs):
            args, kwargs = _npu_arguments(parameters, args, kwargs)
            return served.__new__(cls, *args, **kwargs)

        namespace["__new__"] = __new__
    if served.__init__ is not object.__init__:
        def __init__(self, *args, **kwargs):
            args, kwargs = _npu_arguments(parameters, args, kwargs)
            served.__init__(self, *args, **kwargs)

        namespace["__init__"] = __init__
    translating = _ServedType(served.__name__, (served,), namespace)
    translating.__qualname__ = served.__qualname__
    return translating


def _redirecting_type(table: dict[str, str]) -> type:
    cuda = _cuda_module()
    get = types.ModuleType.__getattribute__
    functions: dict[str, object] = {}
    classes: dict[str, type] = {}
    for name, target in table.items():
        served = getattr(torch.npu, target)
        if isinstance(served, type):
            classes[name] = device_translating_class(served, get(cuda, name))
        elif callable(served):
            functions[name] = _forwarding_function(name, target, get(cuda, name))
    frame = sys._getframe

    class CudaModuleServedByNpu(types.ModuleType):
        """torch.cuda with its device API served by torch.npu (transfer_to_npu)."""

        def __getattribute__(self, name: str):
            served = functions.get(name)
            if served is not None:
                return served
            served = classes.get(name)
            if served is not None and not torch_internal(frame(1)):
                return served
            return get(self, name)

    return CudaModuleServedByNpu


def apply() -> None:
    global _original_type
    module = _cuda_module()
    if _original_type is not None:
        return
    _original_type = type(module)
    module.__class__ = _redirecting_type(redirected_names())


def revert() -> None:
    global _original_type
    if _original_type is None:
        return
    _cuda_module().__class__ = _original_type
    _original_type = None


def sites() -> tuple[str, ...]:
    return ("torch.cuda.__class__",)
