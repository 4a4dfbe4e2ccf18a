"""Static description of each npu device as a plain, immutable Python value.

Compilers read these (Inductor's reduction heuristics use ``multi_processor_count``);
a frozen dataclass is something Dynamo can treat as a constant, unlike an object that
calls into the runtime on attribute access.

``TORCH_NPU_DEVICE_MODEL=<Ascend SKU>`` (``Ascend910B1``..``Ascend910B4``,
``Ascend910B2C``, ``Ascend310P1``, ``Ascend310P3``; see :func:`get_device_model_names`)
makes every device report that card (name, memory, cube/vector cores, L2) and the
allocator enforce its memory; without it the devices are the generic simulated NPU.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch_npu._C as _C

from ._utils import _get_device_index

__all__ = [
    "NpuDeviceProperties",
    "get_device_properties",
    "get_device_name",
    "get_device_capability",
    "get_arch_list",
    "get_device_model_names",
]


@dataclasses.dataclass(frozen=True)
class NpuDeviceProperties:
    """What one npu device is: name, memory, core count, capability, cache size.

    ``cube_core_num``/``vector_core_num`` and ``L2_cache_size`` are the names Ascend's
    ``torch_npu`` uses; ``multi_processor_count`` is the AI (cube) core count.
    """

    name: str
    total_memory: int
    multi_processor_count: int
    major: int
    minor: int
    l2_cache_size: int
    cube_core_num: int = 0
    vector_core_num: int = 0

    @property
    def capability(self) -> tuple[int, int]:
        return (self.major, self.minor)

    @property
    def L2_cache_size(self) -> int:  # noqa: N802  (Ascend's spelling)
        return self.l2_cache_size


# Properties describe hardware and do not change while the process runs, so each
# device is asked once.
_properties_by_index: dict[int, NpuDeviceProperties] = {}


def get_device_properties(device_name: Any = None) -> NpuDeviceProperties:
    """Properties of the device ``device_name`` (an index, ``"npu:i"`` or ``torch.device``;
    default: current device). Ascend's parameter name, kept for its keyword callers."""
    index = _get_device_index(device_name, optional=True)
    props = _properties_by_index.get(index)
    if props is None:
        raw = _C._device_properties(index)
        fields = {f.name for f in dataclasses.fields(NpuDeviceProperties)}
        props = NpuDeviceProperties(**{k: v for k, v in raw.items() if k in fields})
        _properties_by_index[index] = props
    return props


def get_device_name(device_name: Any = None) -> str:
    """Name of the device ``device_name`` (default: current device): the card
    ``TORCH_NPU_DEVICE_MODEL`` names, or the generic simulated NPU."""
    return get_device_properties(device_name).name


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """``(major, minor)`` capability of ``device`` (default: current device): the AI core
    architecture of the card (``dav-c220`` is ``(2, 2)``), ``(1, 0)`` for the generic device.
    The dtypes the device supports are in ``torch.accelerator.get_device_capability()``."""
    return get_device_properties(device).capability


def get_arch_list() -> list[str]:
    """AI core architectures this build runs kernels for, as ``torch.cuda.get_arch_list``
    lists ``sm_*``: every device model's (the simulator runs them all on the host)."""
    return list(_C._device_model_archs())


def get_device_model_names() -> list[str]:
    """The Ascend cards ``TORCH_NPU_DEVICE_MODEL`` can name."""
    return list(_C._device_model_names())
