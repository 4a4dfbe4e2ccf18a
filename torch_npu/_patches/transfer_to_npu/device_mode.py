"""Rewrites ``"cuda"`` device arguments to npu while Dynamo traces: a TorchFunctionMode.

Not a patch: ``torch.overrides.TorchFunctionMode`` is PyTorch's own mechanism for seeing
torch function calls, and the one Dynamo traces (it captures the mode stack at the start
of a compile and traces each mode's ``__torch_function__``). Eager code does not need it:
the dispatcher already sends every cuda device argument to npu (``device_dispatch``), and a
mode on the stack makes *every* torch call take PyTorch's slow ``handle_torch_function``
path (a 1-element add 1.5x slower, whatever the handler does). But Dynamo runs a compiled
function's factories on fake tensors above the dispatcher, where ``device="cuda"`` would
give fake cuda tensors, so a compiled function must see the mode.

So the mode is entered only around calls of functions made by ``torch.compile``: the
``compile_wrappers`` patch gives torch.compile's backend wrappers Dynamo's
``backend_ctx_ctor`` (the documented way for a backend to run each compiled call under a
context), ``CompiledCallContext``, which enters the mode unless a compiled call of this
thread already did. Compilation then traces the mode, and the guard Dynamo puts on the mode
stack holds on every later call of the same compiled function, in any thread. The price is
paid inside compiled calls only: Dynamo's guard on the mode, and the compiled code's own
torch calls (Inductor's wrapper allocates and calls extern kernels through torch functions)
passing through the mode, about 9 us a call of a small compiled MLP.

The handler is C (``torch_npu._C``'s ``_device_redirect_torch_function``, bound to the mode
as its ``__torch_function__``), so that graph-broken code run eagerly inside a compiled
call pays little. Dynamo traces its Python twin,
``python_torch_function``, registered with ``torch.compiler.substitute_in_graph``.
"""
from __future__ import annotations

import sys
import threading
import types
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

import torch_npu._C as _C

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


# Torch functions that need more than their device arguments rewritten:
# func -> handler(func, types, args, kwargs). (The C ``cuda`` method: ``tensor_cuda`` replaces
# ``torch.Tensor.cuda`` by a Python method, but the C one stays reachable.)
_C_TENSOR_CUDA = torch._C.TensorBase.cuda
HANDLERS: dict[Callable, Callable] = {
    _C_TENSOR_CUDA: _tensor_cuda,
}


def python_torch_function(mode, func, types, args=(), kwargs=None):
    """What ``_C._device_redirect_torch_function`` does, in Python (traced by Dynamo)."""
    args = tuple(_as_npu(a) for a in args)
    kwargs = {k: _as_npu(v) for k, v in (kwargs or {}).items()}
    if func is _C_TENSOR_CUDA:
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


# Per thread: how many compiled calls are running (nested ones find the mode already there).
_compiled_calls = threading.local()


class CompiledCallContext:
    """Dynamo's ``backend_ctx_ctor`` for transfer_to_npu: each compiled call runs under the mode.

    Entered once per call of a compiled function, so it is kept to a per-thread counter and
    the C push/pop of the mode stack: about 1.0 us a call, against 1.5 us through the mode's
    own ``__enter__``/``__exit__`` and a search of the stack.
    """

    __slots__ = ("_mode",)

    def __enter__(self) -> None:
        self._mode = _mode
        if self._mode is None:
            return
        depth = getattr(_compiled_calls, "depth", 0)
        if depth == 0:
            torch._C._push_on_torch_function_stack(self._mode)
        _compiled_calls.depth = depth + 1

    def __exit__(self, *exc) -> None:
        if self._mode is None:
            return
        _compiled_calls.depth -= 1
        if _compiled_calls.depth == 0:
            popped = torch._C._pop_torch_function_stack()
            if popped is not self._mode:
                torch._C._push_on_torch_function_stack(popped)
                raise RuntimeError(
                    "a TorchFunctionMode entered inside a compiled function was left on the stack "
                    "when it returned; exit it inside the function"
                )


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
    # The group's other Dynamo registration rides on the same trigger.
    from . import autocast_state

    autocast_state.register_with_dynamo()
    _twin_registered = True


def install() -> None:
    """Make the mode available to compiled calls (it is entered by ``CompiledCallContext``)."""
    global _mode
    if _mode is not None:
        return
    _C._set_device_redirect_handlers(dict(HANDLERS))
    _mode = CudaToNpuMode()
    if "torch._dynamo" in sys.modules:
        register_dynamo_twin()


def uninstall() -> None:
    global _mode
    _mode = None


def installed() -> bool:
    return _mode is not None
