"""``torch.npu.npurt``: the Ascend package's direct bindings of the NPU runtime C API.

The simulated NPU has no Ascend runtime behind it, so the module exists (imports of it
succeed) and every name asked of it raises an AttributeError saying so; use the
``torch.npu`` functions instead, which the simulator implements.
"""
from __future__ import annotations

__all__: list[str] = []


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        f"torch.npu.npurt.{name} is a binding of the Ascend runtime C API, which the simulated NPU "
        "does not have; use the torch.npu functions (streams, events, memory) instead."
    )
