"""The patches no PyTorch 2.13 extension point can replace, and the one place that lists them.

Each patch is a module in this package whose docstring names the missing extension point
and when the patch can be deleted. ``PATCHES`` is the inventory; ``apply(name)`` is the
only way a patch is applied (always from the compile trigger's setup steps), and
``applied()`` reports what has been applied in this process so tests can compare it with
the inventory. Registrations into torch's own extension tables are not patches; they are
listed apart in ``REGISTRATIONS`` for the same tests.

Opt-in patch groups (``GROUPS``; today ``transfer_to_npu``) are subpackages applied only by
their own entry module, never by the trigger, and counted apart: ``apply_group(group)``,
``applied_group(group)``, ``group_inventory(group)``; each group lists its patch modules
(its own ``PATCHES``) and the torch attributes they replace (``sites()``).
"""
from __future__ import annotations

import importlib

# Module names under torch_npu._patches, in application order.
PATCHES: tuple[str, ...] = (
    "inductor_npu_backend_option",
    "rng_prims_npu",
    "fake_tensor_backend_meta",
    "inductor_cudagraph_policy",
)

# Registrations made through PyTorch's extension points (not patches), by description:
# "<extension point>: <what is registered>".
REGISTRATIONS: tuple[str, ...] = (
    "torch._dynamo.device_interface.register_interface_for_device: npu, npu:<index>",
    "torch.compiler.allow_in_graph: torch.npu.stream",
    "torch.compiler.substitute_in_graph(can_constant_fold_through=True): torch.npu."
    "get_device_properties, get_device_name, get_device_capability, device_count",
    "torch._dynamo.utils.common_constant_types: torch.npu.NpuDeviceProperties",
    "torch._functorch._aot_autograd.utils.register_graphsafe_rng_device_type: npu",
    "torch._dynamo.register_backend: npu, npugraph_ex, npugraphs",
    "torch._inductor.codegen.common.register_backend_for_device: npu",
    "torch._inductor.codegen.common.register_device_op_overrides: npu",
    "at::native::_fused_sdp_choice_stub (REGISTER_PRIVATEUSE1_DISPATCH, at import): npu SDPA takes cpu's choice",
    "torch._inductor.decomposition.register_decomposition: the pointwise and normalisation "
    "npu::npu_* operators of torch_npu.ops (their ATen formulas)",
    # Made by import torch_npu (and its autoload entry point), not by the trigger:
    "torch.distributed.Backend.register_backend(extended_api=True, devices=['npu']): hccl",
    "torch._logging register_log / register_artifact: npu; npu_setup, npu_inductor, npu_graphs",
    "torch profiler PrivateUse1 registry (REGISTER_PRIVATEUSE1_PROFILER, registerPrivateUse1Methods): "
    "the npu Kineto activity profiler and marker stubs",
    "multiprocessing.reduction.ForkingPickler.register (the table torch.multiprocessing fills): torch's "
    "tensor classes -> torch_npu._tensor_sharing.reduce_tensor (npu tensors share their memory; others go "
    "to torch's reducer), torch.UntypedStorage -> reduce_storage (npu storages refused as CUDA's are)",
)

_applied: list[str] = []


# Opt-in patch groups, each a subpackage of this package applied only by its own entry
# module (never by the trigger) and counted apart from PATCHES. Each subpackage lists its
# own patch modules (its ``PATCHES``); ``group_inventory`` reads that list.
GROUPS: tuple[str, ...] = ("transfer_to_npu",)


def _check_group(group: str) -> None:
    if group not in GROUPS:
        raise ValueError(f"unknown patch group {group!r}; the groups are {GROUPS}")


def group_inventory(group: str) -> tuple[str, ...]:
    """The patch modules of ``group``, in application order (importing the list applies nothing)."""
    _check_group(group)
    return tuple(importlib.import_module(f"{__name__}.{group}").PATCHES)


def apply_group(group: str) -> None:
    """Apply the opt-in patch group ``group`` (all of it, or none of it)."""
    _check_group(group)
    importlib.import_module(f"{__name__}.{group}").apply()


def applied_group(group: str) -> tuple[str, ...]:
    """The patches of ``group`` applied in this process (none unless its entry was imported)."""
    _check_group(group)
    import sys

    module = sys.modules.get(f"{__name__}.{group}")
    return module.applied() if module is not None else ()


def apply(name: str) -> None:
    """Apply the patch module ``name`` once; it must be listed in ``PATCHES``."""
    if name not in PATCHES:
        raise ValueError(f"unknown patch {name!r}; the inventory is {PATCHES}")
    if name in _applied:
        return
    module = importlib.import_module(f"{__name__}.{name}")
    module.apply()
    _applied.append(name)


def applied() -> tuple[str, ...]:
    """The patches applied in this process, in order."""
    return tuple(_applied)
