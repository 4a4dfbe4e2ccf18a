"""The named setup steps the compile trigger runs once its watched modules are imported.

Each function is one step of ``torch_npu._startup.compile_trigger.STEPS`` and is run at most once
successfully, under the trigger's run-once guard, right after the watched module's code
ran. So a step may use the watched module and what it already imported, but must not
import another watched module (``torch._dynamo``, ``torch._inductor.config``) that is not
loaded yet: another thread could hold that module's import lock while waiting for the
guard. No step initializes the device.

Everything is done through PyTorch's extension points; what is registered is listed in
``torch_npu._patches.REGISTRATIONS`` and the patches in ``PATCHES``.
"""
from __future__ import annotations


def inductor_option() -> None:
    # torch.compile checks options= keys against torch._inductor.config, and the entry
    # must exist before anything snapshots that config: see the patch's docstring.
    from torch_npu import _patches

    _patches.apply("inductor_npu_backend_option")


def inductor_registration() -> None:
    # Registers the npu codegen backends before Inductor's first init_backend_registration(),
    # which happens during an Inductor compile, after torch._inductor.compile_fx is imported.
    from torch_npu.compiler.inductor import registration

    registration.setup()


def fused_op_decompositions() -> None:
    # The fused npu_* operators decompose into their ATen formulas under Inductor, so they
    # fuse; Inductor's decomposition table must have them before its first compile.
    from torch_npu import ops

    ops.register_inductor_decompositions()


def transfer_to_npu_tracing() -> None:
    # When the opt-in transfer_to_npu group is active, Dynamo must trace its device mode
    # through the Python twin of the mode's C handler.
    import sys

    device_mode = sys.modules.get("torch_npu._patches.transfer_to_npu.device_mode")
    if device_mode is not None and device_mode.installed():
        device_mode.register_dynamo_twin()


def device_interface() -> None:
    from torch_npu.compiler import device_interface as interface

    interface.register()


def stream_handlers() -> None:
    # Dynamo builds its handler table once (functools.cache) from the device interfaces
    # registered at that moment; if anything was compiled before import torch_npu, the
    # table lacks torch.npu.stream. Rebuilding it on the next trace picks it up.
    from torch._dynamo.variables.torch import TorchInGraphFunctionVariable

    TorchInGraphFunctionVariable._get_handlers.cache_clear()


def trace_rules() -> None:
    from torch_npu.compiler import trace_rules as rules

    rules.register()


def graphsafe_rng() -> None:
    # Lets AOT autograd thread npu generator state through graphs (NPU graph replay needs
    # it); the runtime provides torch.npu._get_generator and graph-safe generators.
    from torch._functorch._aot_autograd.utils import register_graphsafe_rng_device_type

    register_graphsafe_rng_device_type("npu")


def rng_prims() -> None:
    # Activation checkpointing traces random ops into the RNG higher-order ops, whose
    # device table has no npu: see the patch's docstring.
    from torch_npu import _patches

    _patches.apply("rng_prims_npu")


def reduce_overhead_policy() -> None:
    # mode="reduce-overhead" replays npu graphs from NPU graph trees through Inductor's
    # cudagraph_policy slot, installed for every thread: see the patch's docstring.
    from torch_npu import _patches

    _patches.apply("inductor_cudagraph_policy")


def backends() -> None:
    from torch_npu.compiler.backends import registry

    registry.register_all()


def flex_attention_device() -> None:
    # flex_attention refuses devices outside a fixed set before anything else runs: see the
    # patch's docstring.
    from torch_npu import _patches

    _patches.apply("flex_attention_device")


def flex_attention_autocast() -> None:
    # The FlexAttention higher-order ops have no kernel for npu's autocast key.
    from torch_npu.compiler import flex_attention_autocast as autocast

    autocast.register()
