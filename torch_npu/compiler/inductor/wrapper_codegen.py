"""The wrapper code Inductor generates around npu kernels.

npu memory is host memory, so every npu kernel (C++ or MLIR) runs on the host. Inductor's
stock Python wrapper knows host kernels only for device ``cpu``; for ``npu`` it would take
the GPU path (streams, launchers). These classes emit a host call for npu kernels instead,
routed through the runtime's launch entry point ``torch.npu._launch_host_kernel(fn, *args)``,
which runs the kernel now or, while the current stream is being captured into an NPU
graph, records it for replay. Kernels of cpu tensors in the same graph are called directly,
as Inductor does for cpu.
"""
from __future__ import annotations

from typing import Any

import torch
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.virtualized import V

from . import config as npu_config

DEVICE_TYPE = "npu"
LAUNCH_ENTRY_POINT = "torch.npu._launch_host_kernel"


def _written_positions(arg_types: Any, num_args: int) -> tuple[int, ...] | None:
    """Positions of the pointer arguments a C++ kernel writes (``float*``, not ``const float*``).

    None when the types do not say (the launch then counts every tensor argument as written).
    """
    if not isinstance(arg_types, (list, tuple)) or len(arg_types) != num_args:
        return None
    if not all(isinstance(t, str) for t in arg_types):
        return None
    return tuple(i for i, t in enumerate(arg_types) if t.rstrip().endswith("*") and not t.lstrip().startswith("const"))


class _HostKernelLaunch:
    """Emits npu kernel calls as host calls through the runtime's launch entry point."""

    def _generate_kernel_call_helper(
        self, kernel_name: str, call_args: Any, *, device: Any = None, **kwargs: Any
    ) -> None:
        device = device or V.graph.get_current_device_or_throw()
        if device.type != DEVICE_TYPE:
            super()._generate_kernel_call_helper(  # type: ignore[misc]
                kernel_name, call_args, device=device, **kwargs
            )
            return
        if kwargs.get("triton", True):
            raise RuntimeError(
                f"npu cannot run the Triton kernel {kernel_name}: npu kernels are host "
                f"kernels (npu_backend 'default' or 'mlir')"
            )
        if npu_config.launch_through_runtime:
            args = ", ".join([kernel_name, *call_args])
            # The kernel's name for profiler traces, and which arguments it writes for the
            # stream sanitizer (read by the runtime only while one of them watches).
            args += f", name={kernel_name!r}"
            writes = _written_positions(kwargs.get("arg_types"), len(call_args))
            if writes is not None:
                args += f", writes={writes!r}"
            self.writeline(f"{LAUNCH_ENTRY_POINT}({args}){self.ending}")  # type: ignore[attr-defined]
        else:
            # Exactly what Inductor writes for a cpu kernel.
            super()._generate_kernel_call_helper(  # type: ignore[misc]
                kernel_name, call_args, device=torch.device("cpu"), **kwargs
            )


class NpuSubgraphPythonWrapperCodegen(_HostKernelLaunch, SubgraphPythonWrapperCodegen):
    """Wrapper of a subgraph (control flow bodies) of an npu graph."""


class NpuPythonWrapperCodegen(_HostKernelLaunch, PythonWrapperCodegen):
    """Python wrapper of an npu graph."""

    @staticmethod
    def create(
        is_subgraph: bool,
        subgraph_name: str | None,
        parent_wrapper: PythonWrapperCodegen | None,
        partition_signatures: Any = None,
    ) -> PythonWrapperCodegen:
        if is_subgraph:
            assert subgraph_name is not None and parent_wrapper is not None
            return NpuSubgraphPythonWrapperCodegen(
                subgraph_name, parent_wrapper, partition_signatures
            )
        return NpuPythonWrapperCodegen()


class NpuCppWrapperCodegen(CppWrapperCpu):
    """Placeholder for ``cpp_wrapper=True``, which npu does not support.

    Inductor needs a C++ wrapper class for every device it registers; a C++ wrapper for npu
    would need AOTI shims for the device. Asking for one is a clear error, at compile time.
    """

    @staticmethod
    def create(
        is_subgraph: bool,
        subgraph_name: str | None,
        parent_wrapper: Any,
        partition_signatures: Any = None,
    ) -> Any:
        raise RuntimeError(
            "torch._inductor.config.cpp_wrapper=True (and AOTInductor) is not supported "
            "for npu tensors; compile npu graphs with the default Python wrapper"
        )
