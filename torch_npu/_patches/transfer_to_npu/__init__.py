"""``transfer_to_npu``: the opt-in patch group that runs unmodified CUDA scripts on npu.

Applied only by ``import torch_npu.contrib.transfer_to_npu`` (never by ``import torch_npu``
or the compile trigger) and counted apart from the trigger's patches. It is two kinds of
change:

* PyTorch mechanisms, no patch (``REGISTRATIONS``):
  - ``device_dispatch``: in eager code, where c10 dispatches a cuda device (factories,
    ``Tensor.to``/``.cuda()``, hence ``nn.Module.cuda()``), a dispatcher fallback for the
    CUDA key, a CUDA device guard and the lazy-init flag send it to npu, in every thread.
    Calls without a cuda device (``a + b``) do not pass through anything of it.
  - ``device_mode``: a TorchFunctionMode that rewrites cuda device arguments for Dynamo,
    entered only around calls of compiled functions, with a Python twin Dynamo traces.
  - ``checkpoint_location``: a ``torch.serialization`` package entry that restores storages
    saved on or mapped to ``cuda`` (``torch.load(map_location="cuda")``) on npu.
* The patches (``PATCHES``), for what neither reaches: ``cuda_module`` (the ``torch.cuda``
  API served by ``torch.npu``, cuda device arguments included), ``autocast``
  (``torch.autocast("cuda")``), ``autocast_state`` (``torch.is_autocast_enabled("cuda")``
  and the other state functions), ``custom_fwd`` (``custom_fwd(cast_inputs=...)`` casts npu
  tensors), ``grad_scaler`` (``GradScaler("cuda")``), ``generator``
  (``torch.Generator("cuda")``), ``process_group`` (``"nccl"`` -> ``"hccl"``),
  ``nccl_availability`` (``dist.is_nccl_available()``), ``tensor_cuda`` (``Tensor.cuda()``
  and ``is_cuda``), ``storage_to`` (``storage.cuda()``), ``map_location_dict`` (a
  ``map_location`` dict's cuda keys apply to npu-saved storages), ``nvtx`` (``torch.cuda.nvtx``
  ranges as npu profiler ranges), ``parallel_comm`` (the ``torch._C`` copies
  ``nn.DataParallel`` needs) and ``compile_wrappers`` (torch.compile's calls enter the mode). Each module's docstring says
  why no extension point serves and when it can go; ``sites()`` names exactly what it changes.

``apply()`` imports every module it modifies itself (``torch.cuda``, ``torch.distributed``)
and does not need Dynamo or Inductor to have been imported: the Dynamo twin is registered
when Dynamo is first imported, by the compile trigger, or at once if it already is.
Applying is all or nothing: a failing patch reverts the ones applied before it; ``revert()``
undoes the whole group (for measuring it against the same process without it).
"""
from __future__ import annotations

import importlib

# Patch modules of this group, in application order.
PATCHES: tuple[str, ...] = (
    "cuda_module", "autocast", "autocast_state", "custom_fwd", "grad_scaler", "generator",
    "process_group", "nccl_availability", "tensor_cuda", "storage_to", "map_location_dict", "nvtx",
    "parallel_comm", "compile_wrappers",
)

# What the group registers through PyTorch's and Python's own mechanisms (not patches).
REGISTRATIONS: tuple[str, ...] = (
    "dispatcher boxed fallback (torch::Library IMPL _, CUDA): device_dispatch, cuda devices -> npu",
    "c10 device-guard registry (DeviceGuardImplRegistrar, CUDA): device_dispatch, forwards to npu",
    "torch::utils::set_requires_device_init(CUDA, false): device_dispatch",
    "torch.overrides.TorchFunctionMode: device_mode.CudaToNpuMode, entered around compiled calls",
    "torch.compiler.substitute_in_graph: device_mode.python_torch_function for the C handler",
    "torch.serialization.register_package: checkpoint_location, cuda locations restored on npu",
    "torch._dynamo.variables.torch.constant_fold_functions: autocast_state's originals "
    "(is_autocast_enabled, get_autocast_dtype, get_autocast_gpu_dtype), at Dynamo's import",
)

_applied: list[str] = []


def _patch_module(name: str):
    return importlib.import_module(f"{__name__}.{name}")


def apply() -> None:
    """Apply every patch, then the registrations; all or nothing."""
    if _applied:
        return
    done: list[str] = []
    try:
        for name in PATCHES:
            _patch_module(name).apply()
            done.append(name)
        from . import checkpoint_location, device_dispatch, device_mode

        device_mode.install()
        device_dispatch.install()
        checkpoint_location.install()
    except BaseException:
        _undo(done)
        raise
    _applied.extend(done)


def revert() -> None:
    """Undo ``apply()``: the registrations, then the patches in reverse order."""
    done = list(_applied)
    _applied.clear()
    _undo(done)


def _undo(done: list[str]) -> None:
    from . import checkpoint_location, device_dispatch, device_mode

    checkpoint_location.uninstall()
    device_dispatch.uninstall()
    device_mode.uninstall()
    for name in reversed(done):
        _patch_module(name).revert()


def applied() -> tuple[str, ...]:
    return tuple(_applied)


def sites() -> tuple[str, ...]:
    """Every torch attribute the group's patches replace."""
    return tuple(site for name in PATCHES for site in _patch_module(name).sites())
