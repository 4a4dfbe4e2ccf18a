"""Rewrites ``"cuda"`` device arguments of torch functions to ``"npu"``: a TorchFunctionMode.

Not a patch: ``torch.overrides.TorchFunctionMode`` is PyTorch's own mechanism for seeing every
torch function call (factories with ``device="cuda"``, ``Tensor.to("cuda")``,
``Tensor.cuda()``, which ``nn.Module.cuda()`` calls per tensor, ``torch.get_autocast_dtype("cuda")``
inside ``torch.autocast``...). ``torch.set_default_device``'s mode does not serve: it only
fills in a missing ``device=`` and leaves ``"cuda"`` alone.

Three things make it usable for whole training scripts:

* Cost. The handler runs on every torch call, so it is C (``torch_npu._C``'s
  ``_device_redirect_torch_function``, bound to the mode as its ``__torch_function__``); a
  Python ``__torch_function__`` made a 1-element add 1.5x slower. A few functions go to
  Python handlers (``Tensor.cuda`` becomes ``Tensor.npu``, ``Tensor.is_cuda`` is true for npu
  tensors when the script asks (see ``callers``), and ``backward``/``autograd.grad`` run with the mode re-entered so that the
  autograd engine, which runs backward under the caller's thread-local state, keeps it).
* Threads. The mode stack is per thread, so the mode is entered in every thread started
  after the import, from a ``threading.setprofile`` hook that removes itself as soon as the
  thread has run it (threads that already exist keep their state).
* Dynamo. Code compiled with ``torch.compile`` is traced through the mode; the C handler has
  a Python twin, ``python_torch_function``, registered with
  ``torch.compiler.substitute_in_graph`` so that Dynamo traces it instead of the C function,
  and compiled graphs see npu devices.
"""
from __future__ import annotations

import sys
import threading
import types
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from torch_npu import _C

from .callers import torch_internal

_CUDA = "cuda"
_NPU = "npu"


def _as_npu(value: Any) -> Any:
    if isinstance(value, str):
        if value == _CUDA or value.startswith("cuda:"):
            return _NPU + value[4:]
        return value
    if isinstance(value, torch.device) and value.type == _CUDA:
        return torch.device(_NPU, value.index)
    return value


def _tensor_cuda(func, types, args, kwargs):
    tensor, *rest = args
    return tensor.npu(*rest, **(kwargs or {}))


def _tensor_is_cuda(func, types, args, kwargs):
    # True for npu tensors when the script asks; PyTorch's own modules read is_cuda as
    # "on the CUDA runtime" and keep the real answer (see callers).
    tensor = args[0]
    if tensor.device.type == _NPU:
        return not torch_internal(sys._getframe(1))
    return func(*args, **(kwargs or {}))


def _with_mode_active(func, types, args, kwargs):
    # The autograd engine runs backward under the thread-local state of the call that
    # started it, and PyTorch takes the mode off the stack while its handler runs: started
    # from here, backward (custom Functions, checkpoint recomputation, hooks) would run
    # without the mode. Re-entered, the mode is part of that state.
    with _mode:
        return torch.overrides.redispatch_function(func, types, args, kwargs)


# Torch functions that need more than their device arguments rewritten:
# func -> handler(func, types, args, kwargs).
HANDLERS: dict[Callable, Callable] = {
    torch.Tensor.cuda: _tensor_cuda,
    torch.Tensor.is_cuda.__get__: _tensor_is_cuda,
    torch.Tensor.backward: _with_mode_active,
    torch.autograd.backward: _with_mode_active,
    torch.autograd.grad: _with_mode_active,
}


def python_torch_function(mode, func, types, args=(), kwargs=None):
    """What ``_C._device_redirect_torch_function`` does, in Python (traced by Dynamo)."""
    args = tuple(_as_npu(a) for a in args)
    kwargs = {k: _as_npu(v) for k, v in (kwargs or {}).items()}
    if func is torch.Tensor.cuda:
        return _tensor_cuda(func, types, args, kwargs)
    return func(*args, **kwargs)


class CudaToNpuMode(TorchFunctionMode):
    """Calls every torch function with ``cuda`` devices replaced by ``npu`` devices."""

    def __init__(self) -> None:
        super().__init__()
        # PyTorch requires mode.__torch_function__.__self__ to be the mode: bind the C handler.
        self.__torch_function__ = types.MethodType(_C._device_redirect_torch_function, self)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: D105
        # Shadowed by the bound C handler set in __init__; kept for readers and subclasses.
        return python_torch_function(self, func, types, args, kwargs)


_mode: CudaToNpuMode | None = None
_previous_thread_profile: Any = None


def _enter_mode_in_new_thread(frame, event, arg):
    # Runs once, as the first profile event of each thread started by `threading`, and
    # hands the thread over to whatever profiler was installed before.
    sys.setprofile(_previous_thread_profile)
    if _mode is not None:
        _mode.__enter__()  # left on the thread's mode stack for the thread's lifetime
    if _previous_thread_profile is not None:
        return _previous_thread_profile(frame, event, arg)
    return None


_twin_registered = False


def register_dynamo_twin() -> None:
    """Make Dynamo trace ``python_torch_function`` where the mode calls the C handler.

    Needs ``torch._dynamo``: called by ``install()`` when Dynamo is already imported, else
    by the compile trigger's setup step when it is first imported.
    """
    global _twin_registered
    if _twin_registered:
        return
    from torch.compiler import substitute_in_graph

    substitute_in_graph(_C._device_redirect_torch_function, skip_signature_check=True)(
        python_torch_function
    )
    _twin_registered = True


def install() -> None:
    """Enter the mode in this thread and in every thread started from now on."""
    global _mode, _previous_thread_profile
    if _mode is not None:
        return
    _C._set_device_redirect_handlers(dict(HANDLERS))
    _mode = CudaToNpuMode()
    if "torch._dynamo" in sys.modules:
        register_dynamo_twin()
    _previous_thread_profile = threading.getprofile()
    threading.setprofile(_enter_mode_in_new_thread)
    _mode.__enter__()  # left on this thread's mode stack for the rest of the process


def installed() -> bool:
    return _mode is not None


def is_active_in_this_thread() -> bool:
    return _mode is not None and _mode in torch.overrides._get_current_function_mode_stack()
