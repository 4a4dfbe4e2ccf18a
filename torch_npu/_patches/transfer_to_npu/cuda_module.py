"""Makes ``torch.cuda``'s public API answer with ``torch.npu``'s: one patch site, the module's type.

Missing extension point: ``torch.cuda.is_available()``, ``torch.cuda.synchronize()``,
``torch.cuda.Event``/``Stream``/``CUDAGraph``, ``torch.cuda.manual_seed`` and the rest are
plain module attributes, not torch functions, so no TorchFunctionMode sees them, and PyTorch
has no way to point one device module at another.

Rather than replacing dozens of attributes, ``apply()`` sets the class of the ``torch.cuda``
module object to a ``types.ModuleType`` subclass whose ``__getattribute__`` serves the
redirected names from ``torch.npu`` (Python's documented way to customise a module's
attribute access). Redirected: every public function and class both modules have, and
``CUDAGraph`` as ``torch.npu.NPUGraph``; submodules (``torch.cuda.amp``, ...) and every other
name (``nvtx``, ``jiterator``, ...) stay ``torch.cuda``'s own, as on a machine without CUDA:
their autocast and GradScaler reach npu through the device mode. Code that bound a name before the import
(``from torch.cuda import Event``) keeps what it bound.

Only the script and the libraries it uses are served by npu: PyTorch's own modules
(``torch.*``) still see the real ``torch.cuda``, because they read it as the CUDA runtime
(Inductor's cache key asks ``torch.cuda.get_device_properties()`` for a ROCm architecture
name once ``torch.cuda.is_available()`` is true); whoever asks is read from the calling
frame. For the same reason Dynamo, which reads module attributes itself, sees the real
``torch.cuda`` in compiled code: call ``torch.cuda`` functions outside compiled regions. Functions are served as thin
forwarding functions rather than as ``torch.npu``'s own objects: Dynamo keys its trace
rules on function identity, and ``torch.cuda.<name>`` and ``torch.npu.<name>`` have rules of
their own that must not collide.

Delete when PyTorch lets a script's device module be aliased to another accelerator's.
"""
from __future__ import annotations

import functools
import sys
import types

import torch
import torch.cuda

# torch.cuda name -> torch.npu name, besides the names both have.
ALIASES = {"CUDAGraph": "NPUGraph"}

_original_type: type | None = None


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


def _cuda_module() -> types.ModuleType:
    return torch.cuda


def _forwarding(name: str, target: str):
    npu = torch.npu
    served = getattr(npu, target)
    if isinstance(served, type) or not callable(served):
        return served

    @functools.wraps(served)
    def forward(*args, **kwargs):
        return getattr(npu, target)(*args, **kwargs)

    forward.__qualname__ = forward.__name__ = name
    return forward


def _is_torch_internal(module_name: str) -> bool:
    return module_name == "torch" or (
        module_name.startswith("torch.") and not module_name.startswith("torch_npu")
    )


def _redirecting_type(table: dict[str, str]) -> type:
    served = {name: _forwarding(name, target) for name, target in table.items()}
    get = types.ModuleType.__getattribute__
    frame = sys._getframe

    class CudaModuleServedByNpu(types.ModuleType):
        """torch.cuda with its device API served by torch.npu (transfer_to_npu)."""

        def __getattribute__(self, name: str):
            value = served.get(name, served)
            if value is not served and not _is_torch_internal(frame(1).f_globals.get("__name__", "")):
                return value
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
