"""Runs every call of a function compiled by ``torch.compile`` under transfer_to_npu's mode.

Missing extension point: Dynamo traces device rewriting only through a TorchFunctionMode on
the stack when it compiles, and guards on that stack when the compiled code is called, so
the mode must be there at both moments; outside compiled calls it must not be (it would
make every eager torch call 1.5x slower). Dynamo's own way for a backend to wrap each
compiled call in a context is the backend's ``backend_ctx_ctor`` attribute (read by
``torch._dynamo.optimize``), but ``torch.compile`` wraps every backend, the user's too, in
``torch._TorchCompileWrapper`` or ``torch._TorchCompileInductorWrapper`` (the AOTInductor
wrapper subclasses it), which have none, and Dynamo reads it from the wrapper's instance.

``apply()`` wraps the two ``__init__`` methods (two patch sites) so that each wrapper gets
``backend_ctx_ctor = device_mode.CompiledCallContext``. Functions compiled before the import
are unchanged; ``torch._dynamo.optimize`` called directly is not covered.

Delete when Dynamo traces a device rewrite without a mode on the stack at run time (for
example if it offered a hook on constant device arguments of traced factories).
"""
from __future__ import annotations

import functools

import torch

from . import device_mode

# The classes torch.compile wraps a backend in.
CLASSES = ("_TorchCompileWrapper", "_TorchCompileInductorWrapper")

_originals: dict[str, object] = {}


def _wrap(original):
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.backend_ctx_ctor = device_mode.CompiledCallContext

    return __init__


def apply() -> None:
    if _originals:
        return
    for name in CLASSES:
        cls = getattr(torch, name)
        _originals[name] = cls.__init__
        cls.__init__ = _wrap(cls.__init__)


def revert() -> None:
    for name in CLASSES:
        original = _originals.pop(name, None)
        if original is not None:
            getattr(torch, name).__init__ = original


def sites() -> tuple[str, ...]:
    return tuple(f"torch.{name}.__init__" for name in CLASSES)
