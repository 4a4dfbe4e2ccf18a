"""NPUTensorPipeRpcBackendOptions: TensorPipe RPC options whose device maps name npu devices.

torch's ``TensorPipeRpcBackendOptions`` reads a bare int in a device map as a CUDA
ordinal and accepts only CUDA devices in ``devices``. Ascend code writes ``{0: 1}``
meaning npu:0 -> npu:1, so these options turn ints (and "npu:N" strings) into npu
devices and reject any other device type. (Whether TensorPipe moves npu tensors between
workers is the RPC agent's business; these are the options only.)
"""
from __future__ import annotations

from typing import Dict, List, Optional, Union

import torch
from torch.distributed.rpc import TensorPipeRpcBackendOptions

__all__ = ["NPUTensorPipeRpcBackendOptions"]

DeviceType = Union[int, str, torch.device]


def _npu_device(d: DeviceType) -> torch.device:
    device = torch.device("npu", d) if isinstance(d, int) else torch.device(d)
    if device.type != "npu":
        raise ValueError(f"NPUTensorPipeRpcBackendOptions: {d!r} is not an npu device (use an int or 'npu:N')")
    return device


def _npu_device_map(device_map) -> Dict[torch.device, torch.device]:
    if not isinstance(device_map, dict):
        raise TypeError(f"device map must be a dict of devices, got {type(device_map).__name__}")
    return {_npu_device(k): _npu_device(v) for k, v in device_map.items()}


class NPUTensorPipeRpcBackendOptions(TensorPipeRpcBackendOptions):
    """``TensorPipeRpcBackendOptions`` where ``device_maps`` and ``devices`` name npu devices."""

    def __init__(self, *, num_worker_threads: int = 16, rpc_timeout: float = 60.0, init_method: str = "env://",
                 device_maps: Optional[Dict[str, Dict[DeviceType, DeviceType]]] = None,
                 devices: Optional[List[DeviceType]] = None, _transports: Optional[List] = None,
                 _channels: Optional[List] = None):
        maps = None if device_maps is None else {to: _npu_device_map(m) for to, m in device_maps.items()}
        npu_devices = None if devices is None else [_npu_device(d) for d in devices]
        # torch's constructor accepts CUDA devices only in ``devices``: set them after it.
        super().__init__(num_worker_threads=num_worker_threads, rpc_timeout=rpc_timeout, init_method=init_method,
                         device_maps=maps, devices=None, _transports=_transports, _channels=_channels)
        if npu_devices is not None:
            self.devices = npu_devices

    def set_device_map(self, to: str, device_map: Dict[DeviceType, DeviceType]):
        """Adds npu device placements from this worker to worker ``to``."""
        super().set_device_map(to, _npu_device_map(device_map))

    def set_devices(self, devices: List[DeviceType]):
        """The npu devices this worker's RPC agent uses."""
        self.devices = [_npu_device(d) for d in devices]
