"""The registry of TorchScript fusion passes and ``optimize``, which runs them all."""
from __future__ import annotations

import torch

__all__ = ["optimize", "register_fusion_pass", "registered_passes"]

_PASSES: list = []


def register_fusion_pass(fn):
    """Adds ``fn(jit_mod)`` to the passes ``optimize`` runs (once; returns ``fn``)."""
    if fn not in _PASSES:
        _PASSES.append(fn)
    return fn


def registered_passes() -> list:
    _load_builtin_passes()
    return list(_PASSES)


def _load_builtin_passes() -> None:
    from torch_npu.jit.fusion_pass import fast_gelu

    register_fusion_pass(fast_gelu.fast_gelu_pass)


def optimize(jit_mod):
    """Rewrites the graphs of the TorchScript module ``jit_mod`` (and its submodules) in place."""
    if not isinstance(jit_mod, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        raise TypeError(f"torch_npu.jit.optimize expects a TorchScript module (torch.jit.script or "
                        f"torch.jit.trace of a model), got {type(jit_mod).__name__}")
    for fusion_pass in registered_passes():
        fusion_pass(jit_mod)
    return jit_mod
