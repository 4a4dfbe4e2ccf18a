"""``transfer_to_npu``: the opt-in patch group that runs unmodified CUDA scripts on npu.

Applied only by ``import torch_npu.contrib.transfer_to_npu`` (never by ``import torch_npu``
or the compile trigger) and counted apart from the trigger's patches. It is two kinds of
change:

* PyTorch mechanisms, no patch: ``device_mode`` enters a TorchFunctionMode, in every thread,
  that rewrites ``"cuda"`` device arguments of torch functions to npu (factories,
  ``Tensor.to``/``.cuda()``, hence ``nn.Module.cuda()``/``.to("cuda")``, autocast's device
  type, ``GradScaler``'s tensors), with a Python twin Dynamo traces.
* The patches (``PATCHES``), for what is not a torch function: ``cuda_module`` (the
  ``torch.cuda`` API served by ``torch.npu``), ``autocast`` (``torch.autocast("cuda")``),
  ``grad_scaler`` (``GradScaler("cuda")``), ``generator`` (``torch.Generator("cuda")``) and ``process_group`` (``"nccl"`` ->
  ``"hccl"``). Each module's docstring says why no
  extension point serves and when it can go; ``sites()`` names exactly what it changes.

``apply()`` imports every module it modifies itself (``torch.cuda``, ``torch.distributed``)
and does not need Dynamo or Inductor to have been imported: the Dynamo twin is registered
when Dynamo is first imported, by the compile trigger, or at once if it already is.
Applying is all or nothing: a failing patch reverts the ones applied before it.
"""
from __future__ import annotations

import importlib

# Patch modules of this group, in application order.
PATCHES: tuple[str, ...] = ("cuda_module", "autocast", "grad_scaler", "generator", "process_group")

# What the group registers through PyTorch's and Python's own mechanisms (not patches).
REGISTRATIONS: tuple[str, ...] = (
    "torch.overrides.TorchFunctionMode: device_mode.CudaToNpuMode, entered in the importing thread",
    "threading.setprofile: a one-shot hook entering the mode in each new thread",
    "torch.compiler.substitute_in_graph: device_mode.python_torch_function for the C handler",
)

_applied: list[str] = []


def _patch_module(name: str):
    return importlib.import_module(f"{__name__}.{name}")


def apply() -> None:
    """Apply every patch, then enter the device mode; all or nothing."""
    if _applied:
        return
    done: list[str] = []
    try:
        for name in PATCHES:
            _patch_module(name).apply()
            done.append(name)
        from . import device_mode

        device_mode.install()
    except BaseException:
        for name in reversed(done):
            _patch_module(name).revert()
        raise
    _applied.extend(done)


def applied() -> tuple[str, ...]:
    return tuple(_applied)


def sites() -> tuple[str, ...]:
    """Every torch attribute the group's patches replace."""
    return tuple(site for name in PATCHES for site in _patch_module(name).sites())
