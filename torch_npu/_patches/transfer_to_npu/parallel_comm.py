"""Gives ``nn.DataParallel`` the device-to-device copies it needs, for npu tensors.

Missing extension point: ``torch.nn.parallel.comm`` (re-exported as ``torch.cuda.comm``)
moves data between devices through C functions of ``torch._C`` that only a CUDA build
defines (``_broadcast``, ``_broadcast_out``, ``_broadcast_coalesced``, ``_scatter``,
``_scatter_out``, ``_gather``, ``_gather_out``); a CPU build has none, so
``nn.DataParallel(model.cuda())`` fails with ``AttributeError: torch._C has no attribute
_scatter``. Everything above them (``DataParallel``, ``replicate``, ``parallel_apply``,
``reduce_add``) already runs on any accelerator. The Ascend package leaves DataParallel
unsupported; on the simulated devices it can work as it does on CUDA.

``apply()`` adds these seven functions to ``torch._C`` (seven patch sites; it refuses to
replace a CUDA build's own), with the semantics of ``torch/csrc/cuda/comm.cpp``: the
broadcast's first output is the input itself, a scatter chunk already on its device is a
view, a gather concatenates in device order on ``destination`` (``-1``: cpu). Each copy is
one ``copy_`` into memory of the target device, so results equal a single-device run of the
same chunks.

Delete when PyTorch's comm functions fall back to ``Tensor.to`` for non-CUDA devices.
"""
from __future__ import annotations

from typing import Sequence

import torch

_NPU = "npu"
NAMES = (
    "_broadcast", "_broadcast_out", "_broadcast_coalesced", "_scatter", "_scatter_out",
    "_gather", "_gather_out",
)

_added: list[str] = []


def _npu(index: int) -> torch.device:
    return torch.device(_NPU, index)


def _check_tensor(tensor: torch.Tensor, what: str) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} expects tensors, but got {type(tensor).__name__}")


def _copy_to(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    return torch.empty_like(tensor, device=device).copy_(tensor)


def _broadcast(tensor: torch.Tensor, devices: Sequence[int]) -> list[torch.Tensor]:
    _check_tensor(tensor, "broadcast")
    if not devices:
        raise RuntimeError("broadcast: expected at least one device")
    if tensor.device.type == _NPU and tensor.get_device() != devices[0]:
        raise RuntimeError("device of broadcasted tensor must appear as the first on devices list")
    first = tensor if tensor.device.type == _NPU else tensor.to(_npu(devices[0]))
    return [first] + [_copy_to(tensor, _npu(d)) for d in devices[1:]]


def _broadcast_out(tensor: torch.Tensor, out: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    _check_tensor(tensor, "broadcast")
    for i, target in enumerate(out):
        if target.device.type != _NPU:
            raise RuntimeError(f"Expected all output tensors to be npu tensors, but output tensor at index {i} has device '{target.device}'")
        if target.shape != tensor.shape:
            raise RuntimeError(
                f"Expected all output tensors to have same shape as the source tensor {tuple(tensor.shape)}, "
                f"but output tensor at index {i} has shape {tuple(target.shape)}"
            )
        target.copy_(tensor)
    return list(out)


def _broadcast_coalesced(tensors: Sequence[torch.Tensor], devices: Sequence[int], buffer_size: int = 10485760) -> list[list[torch.Tensor]]:
    if not devices:
        raise RuntimeError("broadcast_coalesced: expected at least one device")
    for tensor in tensors:
        _check_tensor(tensor, "broadcast_coalesced")
        if tensor.device != _npu(devices[0]):
            raise RuntimeError("All tensors must be on devices[0]: " + str(devices[0]))
    outputs = [list(tensors)]
    outputs += [[_copy_to(t, _npu(d)) for t in tensors] for d in devices[1:]]
    return outputs


def _scatter(tensor: torch.Tensor, devices: Sequence[int], chunk_sizes=None, dim: int = 0, streams=None) -> tuple[torch.Tensor, ...]:
    _check_tensor(tensor, "scatter")
    if not devices:
        raise RuntimeError("Expected at least one device to scatter to")
    if chunk_sizes is not None:
        if len(chunk_sizes) != len(devices):
            raise RuntimeError(
                f"Expected devices and chunk_sizes to be of same length, but got len(devices) = "
                f"{len(devices)} and len(chunk_sizes) = {len(chunk_sizes)}"
            )
        chunks = tensor.split_with_sizes(list(chunk_sizes), dim)
    else:
        chunks = tensor.chunk(len(devices), dim)
    out = []
    for i, chunk in enumerate(chunks):
        stream = streams[i] if streams else None
        if stream is not None:
            with torch.npu.stream(stream):
                out.append(chunk.to(_npu(devices[i]), non_blocking=True))
        else:
            out.append(chunk.to(_npu(devices[i]), non_blocking=True))
    return tuple(out)


def _scatter_out(tensor: torch.Tensor, out: Sequence[torch.Tensor], dim: int = 0, streams=None) -> tuple[torch.Tensor, ...]:
    _check_tensor(tensor, "scatter")
    sizes = [t.size(dim) for t in out]
    if sum(sizes) != tensor.size(dim):
        raise RuntimeError(
            f"Total size for output tensors along scatter dim ({sum(sizes)}) does not match "
            f"the size of the source tensor along that dim ({tensor.size(dim)})"
        )
    for i, (chunk, target) in enumerate(zip(tensor.split_with_sizes(sizes, dim), out)):
        stream = streams[i] if streams else None
        if stream is not None:
            with torch.npu.stream(stream):
                target.copy_(chunk, non_blocking=True)
        else:
            target.copy_(chunk, non_blocking=True)
    return tuple(out)


def _gather_shape(tensors: Sequence[torch.Tensor], dim: int) -> list[int]:
    if not tensors:
        raise RuntimeError("Expected at least one tensor to gather from")
    first = tensors[0]
    shape = list(first.shape)
    dim = dim % max(first.dim(), 1)
    total = 0
    for i, tensor in enumerate(tensors):
        _check_tensor(tensor, "gather")
        if tensor.device.type != _NPU:
            raise RuntimeError(f"Expected all input tensors to be npu tensors, but tensor at index {i} has device {tensor.device}")
        if tensor.dim() != first.dim():
            raise RuntimeError(
                f"Expected all input tensors to have the same number of dimensions, but tensor at index {i} "
                f"has {tensor.dim()} dimensions, (expected {first.dim()})"
            )
        for d in range(first.dim()):
            if d != dim and tensor.size(d) != first.size(d):
                raise RuntimeError(
                    f"Input tensor at index {i} has invalid shape {list(tensor.shape)}, "
                    f"but expected {shape[:d] + [tensor.size(d)] + shape[d + 1:]}"
                )
        total += tensor.size(dim)
    shape[dim] = total
    return shape


def _gather_into(result: torch.Tensor, tensors: Sequence[torch.Tensor], dim: int) -> torch.Tensor:
    offset = 0
    for tensor in tensors:
        result.narrow(dim, offset, tensor.size(dim)).copy_(tensor, non_blocking=True)
        offset += tensor.size(dim)
    return result


def _gather(tensors: Sequence[torch.Tensor], dim: int = 0, destination: int | None = None) -> torch.Tensor:
    shape = _gather_shape(tensors, dim)
    if destination is None:
        destination = torch.npu.current_device()
    device = torch.device("cpu") if destination == -1 else _npu(destination)
    result = torch.empty(shape, dtype=tensors[0].dtype, device=device)
    return _gather_into(result, tensors, dim % max(tensors[0].dim(), 1))


def _gather_out(tensors: Sequence[torch.Tensor], out: torch.Tensor, dim: int = 0) -> torch.Tensor:
    shape = _gather_shape(tensors, dim)
    if list(out.shape) != shape:
        raise RuntimeError(f"Expected out tensor to have shape {shape}, but got {list(out.shape)}")
    return _gather_into(out, tensors, dim % max(tensors[0].dim(), 1))


FUNCTIONS = {
    "_broadcast": _broadcast,
    "_broadcast_out": _broadcast_out,
    "_broadcast_coalesced": _broadcast_coalesced,
    "_scatter": _scatter,
    "_scatter_out": _scatter_out,
    "_gather": _gather,
    "_gather_out": _gather_out,
}


def apply() -> None:
    if _added:
        return
    present = [name for name in NAMES if hasattr(torch._C, name)]
    if present:
        raise RuntimeError(f"torch._C already defines {present} (a CUDA build?); transfer_to_npu will not replace them")
    for name in NAMES:
        setattr(torch._C, name, FUNCTIONS[name])
        _added.append(name)


def revert() -> None:
    while _added:
        delattr(torch._C, _added.pop())


def sites() -> tuple[str, ...]:
    return tuple(f"torch._C.{name}" for name in NAMES)
