"""The device-specific snippets Inductor writes into npu wrapper code.

Inductor asks a ``DeviceOpOverrides`` per device for its device guard, ``set_device``,
``synchronize``, current stream and raw stream. npu kernels are host calls launched
through the runtime on the current stream, so no raw stream handle is ever passed to a
kernel; the guard only makes the graph's device current while its kernels are launched
(so they go to that device's current stream). The guard is the runtime's
``torch.npu._DeviceGuard`` (as ``torch.cuda._DeviceGuard`` for CUDA): a C context manager,
because the npu wrapper runs every compiled call under one (``torch.accelerator.device_index``,
a Python class, cost each call ~1 µs more).
"""
from __future__ import annotations

from textwrap import dedent

from torch._inductor.codegen.common import DeviceOpOverrides


class NpuDeviceOpOverrides(DeviceOpOverrides):
    def import_get_raw_stream_as(self, name: str) -> str:
        # Host kernels take no stream argument; the name must still resolve.
        return dedent(
            f"""
            def {name}(_):
                return 0
            """
        )

    def set_device(self, device_idx: int) -> str:
        # The guard below has already made the device current.
        return "pass"

    def synchronize(self) -> str:
        return "torch.npu.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.npu._DeviceGuard({device_idx})"

    def current_stream(self) -> str:
        return "torch.npu.current_stream()"

    def cpp_kernel_type(self) -> str:
        return "void*"
