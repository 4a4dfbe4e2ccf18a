"""The wrapper code Inductor generates around npu kernels.

npu memory is host memory, so every npu kernel (C++ or MLIR) runs on the host. Inductor's
stock Python wrapper knows host kernels only for device ``cpu``; for ``npu`` it would take
the GPU path (streams, launchers). These classes emit a host call for npu kernels instead,
routed through the runtime's launch entry point ``torch.npu._launch_host_kernel(fn, *args)``,
which runs the kernel now or, while the current stream is being captured into an NPU
graph, records it for replay. Kernels of cpu tensors in the same graph are called directly,
as Inductor does for cpu.

Inductor emits a device guard only for GPU device types, so without one an npu graph's
buffers would be allocated on the current device (``device='npu'``) and its kernels
launched on that device's stream, whatever device the inputs are on: a model on
``npu:1`` would get ``npu:0`` outputs. The npu wrapper therefore runs the graph's body
under a guard of its npu device and allocates npu buffers on their own device index,
through the runtime's allocation entry point ``torch.npu._empty_strided(size, stride,
dtype, index)`` (as Inductor's ``empty_strided_cpu`` for cpu buffers). Convolutions (the
runtime's ``npu::_convolution_host_layout``, see ``conv_host_layout``) are called through
its entry point ``torch.npu._convolution_host_layout(...)``, as cpu's code calls
``torch.convolution``: the same kernel without the boxed call through ``torch.ops``.

The module header binds these entry points and the guard to module-level names
(``npu_launch_host_kernel = torch.npu._launch_host_kernel``, ...), as Inductor binds
``empty_strided_cpu`` and ``assert_size_stride``: the body then reads each with one global
lookup instead of two module attribute lookups (~60 ns each, five or more a call).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.codegen.wrapper import (
    PythonWrapperCodegen,
    SubgraphPythonWrapperCodegen,
    WrapperLine,
)
from torch._inductor.virtualized import V

from . import config as npu_config

DEVICE_TYPE = "npu"
# The runtime's entry points, by the module-level names the generated code binds them to.
LAUNCH_ENTRY_POINT = "npu_launch_host_kernel"
ALLOCATION_ENTRY_POINT = "empty_strided_npu"
CONVOLUTION_ENTRY_POINT = "npu_convolution_host_layout"
DEVICE_GUARD = "npu_device_guard"
_HEADER_BINDINGS = {
    LAUNCH_ENTRY_POINT: "_launch_host_kernel",
    ALLOCATION_ENTRY_POINT: "_empty_strided",
    CONVOLUTION_ENTRY_POINT: "_convolution_host_layout",
    DEVICE_GUARD: "_DeviceGuard",
}


def _is_host_layout_convolution(extern_kernel: Any) -> bool:
    """A call of ``npu::_convolution_host_layout`` with positional arguments only, when the
    runtime has the entry point for it."""
    from .conv_host_layout import host_layout_op

    op = getattr(extern_kernel, "op_overload", None)
    return (
        op is not None
        and op is host_layout_op()
        and not getattr(extern_kernel, "kwargs", None)
        and hasattr(torch.npu, _HEADER_BINDINGS[CONVOLUTION_ENTRY_POINT])
    )


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
    """Emits npu kernel calls as host calls through the runtime's launch entry point, and
    npu convolutions through the runtime's convolution entry point."""

    def _generate_extern_kernel_alloc_helper(self, extern_kernel: Any, args: Any) -> None:
        if not _is_host_layout_convolution(extern_kernel):
            super()._generate_extern_kernel_alloc_helper(extern_kernel, args)
            return
        # Inductor writes ``<name> = <kernel name>(<args>)``; only the name changes.
        python_kernel_name = extern_kernel.python_kernel_name
        extern_kernel.python_kernel_name = CONVOLUTION_ENTRY_POINT
        try:
            super()._generate_extern_kernel_alloc_helper(extern_kernel, args)
        finally:
            extern_kernel.python_kernel_name = python_kernel_name

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


@dataclasses.dataclass
class EnterNpuDeviceLine(WrapperLine):
    """``with <npu device guard>:`` around the rest of the graph's body."""

    device_idx: int

    def codegen(self, code: Any) -> None:
        # ``NpuDeviceOpOverrides().device_guard``, through the header's binding.
        code.writeline(f"with {DEVICE_GUARD}({self.device_idx}):")
        code.do_indent()


class ExitNpuDeviceLine(WrapperLine):
    def codegen(self, code: Any) -> None:
        code.do_unindent()


def graph_npu_device_indices() -> list[int]:
    """Indices of the npu devices the graph being compiled has tensors on, sorted."""
    devices = V.graph.device_node_mapping
    return sorted({d.index for d in devices if d.type == DEVICE_TYPE and d.index is not None})


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

    def write_header(self) -> None:
        super().write_header()
        # A runtime without the convolution entry point gets None: its code never calls it.
        self.header.splice(
            "\n".join(
                f"{name} = getattr(torch.npu, {attr!r}, None)"
                if name == CONVOLUTION_ENTRY_POINT
                else f"{name} = torch.npu.{attr}"
                for name, attr in _HEADER_BINDINGS.items()
            )
        )

    def run_wrapper_ir_passes(self, is_inference: bool) -> None:
        super().run_wrapper_ir_passes(is_inference)
        # Guard the body with the graph's npu device, as Inductor does for GPUs; with
        # tensors on several npu devices (explicit copies in the graph) buffers still go
        # to their own device (make_allocation) and kernels run where their data is.
        indices = graph_npu_device_indices()
        if len(indices) == 1:
            self.lines.insert(0, EnterNpuDeviceLine(indices[0]))
            self.lines.append(ExitNpuDeviceLine())

    def make_allocation(
        self,
        name: str,
        device: torch.device,
        dtype: torch.dtype,
        shape: Any,
        stride: Any,
        allocation_shape: Any = None,
        is_pinned: bool = False,
    ) -> str:
        from torch._inductor import config as inductor_config

        if (
            device.type != DEVICE_TYPE
            or device.index is None
            or inductor_config.test_configs.track_memory_lifecycle
        ):
            return super().make_allocation(
                name, device, dtype, shape, stride, allocation_shape, is_pinned
            )
        # As Inductor's ``empty_strided_cpu(size, stride, dtype)`` line, through the runtime's
        # allocation entry point (no argument parser, no dispatch), on the buffer's own device.
        if allocation_shape is None:
            allocation_shape = shape
        shape_tuple = self.codegen_python_shape_tuple(shape)
        allocation_tuple = self.codegen_python_shape_tuple(allocation_shape)
        stride_tuple = self.codegen_python_shape_tuple(stride)
        out = f"{name} = {ALLOCATION_ENTRY_POINT}({allocation_tuple}, {stride_tuple}, {dtype}, {device.index})"
        if shape_tuple != allocation_tuple:
            out += f".as_strided({shape_tuple}, {stride_tuple})"
        return out


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
