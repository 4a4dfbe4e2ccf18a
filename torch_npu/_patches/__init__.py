"""The patches no PyTorch 2.13 extension point can replace, and the one place that lists them.

Each patch is a module in this package whose docstring names the missing extension point
and when the patch can be deleted. ``PATCHES`` is the inventory; ``apply(name)`` is the
only way a patch is applied (always from the compile trigger's setup steps), and
``applied()`` reports what has been applied in this process so tests can compare it with
the inventory. Registrations into torch's own extension tables are not patches; they are
listed apart in ``REGISTRATIONS``, keyed by name, each with why it exists and what it costs
code that never touches an npu tensor, for the same tests. Those ``import torch_npu`` makes
that change the whole process (``process_wide()``: the CPU allocator redirect, dispatcher
entries on keys other than npu's, import finders, exit and fork handlers) are listed there
too; ``bench/bench_cpu_only.py`` measures what they cost a cpu-only workload.

Opt-in patch groups (``GROUPS``; today ``transfer_to_npu``) are subpackages applied only by
their own entry module, never by the trigger, and counted apart: ``apply_group(group)``,
``applied_group(group)``, ``group_inventory(group)``; each group lists its patch modules
(its own ``PATCHES``) and the torch attributes they replace (``sites()``).
"""
from __future__ import annotations

import importlib
from typing import NamedTuple

# Module names under torch_npu._patches, in application order.
PATCHES: tuple[str, ...] = (
    "inductor_npu_backend_option",
    "rng_prims_npu",
    "inductor_cudagraph_policy",
    "flex_attention_device",
)

class Registration(NamedTuple):
    """One registration into torch's own tables, what it does, and what it costs code that
    never touches an npu tensor."""

    what: str  # "<extension point>: <what is registered>"
    why: str
    cpu_only_cost: str
    # The dispatcher entries it adds outside npu's own keys (the PrivateUse1 family) and
    # outside the ``npu`` namespace, as "<operator> at <DispatchKey>"; the inventory test
    # reads every registration the dispatcher holds from torch_npu's files and compares.
    dispatcher: tuple[str, ...] = ()
    # Made at ``import torch_npu`` and changing the process for code that never touches npu.
    process_wide: bool = False


_NONE_FOR_CPU = "none: consulted only for the npu device"

# Registrations made through PyTorch's extension points (not patches), keyed by name. The
# first group is made by the compile trigger's setup steps, the rest by ``import torch_npu``
# (the runtime's C++ registrations included): those change the whole process.
REGISTRATIONS: dict[str, Registration] = {
    "dynamo_device_interface": Registration(
        "torch._dynamo.device_interface.register_interface_for_device: npu, npu:<index>",
        "Dynamo traces npu streams, events and device queries", _NONE_FOR_CPU),
    "stream_in_graph": Registration(
        "torch.compiler.allow_in_graph: torch.npu.stream",
        "`with torch.npu.stream(s)` stays a stream context in graphs", _NONE_FOR_CPU),
    "folded_device_queries": Registration(
        "torch.compiler.substitute_in_graph(can_constant_fold_through=True): torch.npu."
        "get_device_properties, get_device_name, get_device_capability, device_count",
        "device queries fold to constants in graphs", _NONE_FOR_CPU),
    "device_properties_constant": Registration(
        "torch._dynamo.utils.common_constant_types: torch.npu.NpuDeviceProperties",
        "folded device properties are constants Dynamo can hold", "none: one more type in a set"),
    "graphsafe_rng": Registration(
        "torch._functorch._aot_autograd.utils.register_graphsafe_rng_device_type: npu",
        "random ops replay in NPU graphs", _NONE_FOR_CPU),
    "dynamo_backends": Registration(
        "torch._dynamo.register_backend: npu, npugraph_ex, npugraphs",
        "torch.compile(backend=...) finds them", "none: three more names in Dynamo's backend table"),
    "inductor_codegen": Registration(
        "torch._inductor.codegen.common.register_backend_for_device: npu",
        "Inductor generates npu kernels", _NONE_FOR_CPU),
    "inductor_device_op_overrides": Registration(
        "torch._inductor.codegen.common.register_device_op_overrides: npu",
        "Inductor's wrapper code for npu", _NONE_FOR_CPU),
    "npu_op_decompositions": Registration(
        "torch._inductor.decomposition.register_decomposition: the pointwise and normalisation "
        "npu::npu_* operators of torch_npu.ops (their ATen formulas)",
        "Inductor fuses them", "none: keys are npu operators only"),
    "flex_attention_autocast": Registration(
        "HigherOrderOperator.py_impl(DispatchKey.AutocastPrivateUse1): torch.ops.higher_order.flex_attention, "
        "flex_attention_backward",
        "flex attention on npu inside torch.autocast('npu') (the ops have no kernel for npu's autocast key)",
        _NONE_FOR_CPU),
    "sdpa_choice": Registration(
        "at::native::_fused_sdp_choice_stub (REGISTER_PRIVATEUSE1_DISPATCH, at import): npu SDPA takes cpu's choice",
        "scaled_dot_product_attention on npu picks the kernel cpu picks", _NONE_FOR_CPU),
    "hccl_backend": Registration(
        "torch.distributed.Backend.register_backend(extended_api=True, devices=['npu']): hccl",
        "init_process_group('hccl') and npu tensors in collectives",
        "none: one more name in torch.distributed's backend tables (its module loads on first use)"),
    "log_names": Registration(
        "torch._logging register_log / register_artifact: npu; npu_setup, npu_inductor, npu_graphs",
        "TORCH_LOGS=npu,+npu_graphs (an unknown name there is fatal)", "none: names in the log registry"),
    "npu_profiler": Registration(
        "torch profiler PrivateUse1 registry (REGISTER_PRIVATEUSE1_PROFILER, registerPrivateUse1Methods): "
        "the npu Kineto activity profiler and marker stubs",
        "ProfilerActivity.NPU rows in torch.profiler traces",
        "none outside profiling; a profile asks the npu profiler for its activities, which it has only "
        "for ProfilerActivity.NPU"),
    "multiprocessing_reducers": Registration(
        "multiprocessing.reduction.ForkingPickler.register (the table torch.multiprocessing fills): torch's "
        "tensor classes -> torch_npu._tensor_sharing.reduce_tensor (npu tensors share their memory; others go "
        "to torch's reducer), torch.UntypedStorage -> reduce_storage (npu storages refused as CUDA's are)",
        "npu tensors sent through torch.multiprocessing share their memory",
        "a cpu tensor sent to another process passes one more Python call (a device check) on its way to "
        "torch's reducer",
        process_wide=True),
    "cpu_allocator_redirect": Registration(
        "c10::SetCPUAllocator(priority 1) at import of torch_npu._C (csrc/runtime/allocator.cpp, "
        "install_cpu_allocation_redirect): the CPU allocator is wrapped by the npu's redirect",
        "npu kernels are cpu's kernels on npu memory: while one runs (a thread-local scope), what it "
        "allocates through the CPU allocator (outputs, workspaces) is npu memory, so results land on the "
        "device without a copy",
        "every CPU allocation: one more virtual call and a thread-local read (frees go straight to the "
        "wrapped allocator's deleter); c10's raw CPU frees (raw_deallocate) take the npu allocator's lock to "
        "tell npu blocks from host ones. bench/bench_cpu_only.py measures it",
        process_wide=True),
    "conjugate_negative_copy": Registration(
        "TORCH_LIBRARY_IMPL(aten, Conjugate/Negative) fallthrough (csrc/aten/math_bits.cpp): aten::_copy_from and "
        "aten::_copy_from_and_resize",
        "the npu copy kernel resolves lazy conjugate/negative views itself; resolving them first recursed "
        "through _copy_from until the stack overflowed",
        "none for cpu tensors: their copies never call _copy_from (only devices that copy through it do, "
        "and those now get the view's bits to resolve in their copy kernel, as npu does)",
        dispatcher=("aten::_copy_from at Conjugate", "aten::_copy_from at Negative",
                    "aten::_copy_from_and_resize at Conjugate", "aten::_copy_from_and_resize at Negative"),
        process_wide=True),
    "accelerator": Registration(
        "at::RegisterPrivateUse1HooksInterface, C10_REGISTER_GUARD_IMPL(PrivateUse1), REGISTER_HOST_ALLOCATOR(npu), "
        "c10::SetAllocator(npu) at import of torch_npu._C: npu is the process's accelerator",
        "torch.accelerator, device guards, pinned memory and storages work for npu",
        "none per operation; accelerator-aware code finds npu as it would find cuda: "
        "torch.accelerator.current_accelerator() is npu, Tensor.pin_memory() and DataLoader(pin_memory=True) "
        "pin through the npu host allocator (without torch_npu a cpu-only build has no pinned memory)",
        process_wide=True),
    "import_finders": Registration(
        "sys.meta_path: the npugraph_ex alias finder (permanent) and the compile trigger's finder (until "
        "torch._dynamo and Inductor's watched modules are imported)",
        "`import npugraph_ex` finds the bundled package; Dynamo/Inductor integration is set up when they load",
        "each import of a module not yet loaded asks them first: 0.3–0.5 ms per 1,000 imports "
        "(bench/bench_trigger.py)",
        process_wide=True),
    "exit_handler": Registration(
        "atexit: torch_npu._startup.autograd_exit_barrier",
        "autograd's npu device threads finish before the interpreter finalises",
        "at exit, one call that returns at once when no npu device was initialised",
        process_wide=True),
    "fork_handler": Registration(
        "os.register_at_fork(after_in_child): the compile trigger's run-once guard resets in a forked child",
        "a forked child runs setup steps itself instead of waiting on a lock held by a parent's thread",
        "each fork runs one small Python function in the child",
        process_wide=True),
}


def process_wide() -> tuple[str, ...]:
    """The registrations made at ``import torch_npu`` that change the process for cpu-only code."""
    return tuple(name for name, entry in REGISTRATIONS.items() if entry.process_wide)


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
