"""Sharing npu tensors with other processes (torch.multiprocessing, DataLoader workers).

torch.multiprocessing pickles tensors with the reducers it puts in multiprocessing's
``ForkingPickler`` table: cuda tensors go through CUDA IPC, every other device through
``_share_fd_cpu_``, which refuses npu storages, and ``torch/multiprocessing/reductions.py``
has no hook for another device. So ``register()`` (run by ``import torch_npu``) puts a
reducer in that same table for torch's tensor classes: an npu tensor is sent as the pages
of its device's memory file that hold its storage (``csrc/runtime/device_memory_file.h``), any other
tensor goes to torch's reducer unchanged. The receiver maps those pages: both processes
see the same memory and each other's writes, as with CUDA. No torch attribute is replaced;
the table is multiprocessing's documented registry. Delete this module when PyTorch's
reductions let a PrivateUse1 backend share its storages.

As CUDA does (its IPC reference counter), the sender keeps every storage it sent until the
receiver lets go of it, so the memory is not reused under the receiver's feet. A tensor
travels as ``rebuild_npu_tensor`` and the fifteen arguments Ascend's (and CUDA's) rebuild
takes, so that ``torch_npu.multiprocessing.reductions`` names the function pickles refer to;
``interprocess=True`` npu events travel as ``rebuild_npu_event(device, handle)``.
"""
from __future__ import annotations

import os
import threading
from multiprocessing.reduction import DupFd, ForkingPickler

import torch
from torch.multiprocessing import reductions as _torch_reductions

import torch_npu._C as _C

__all__ = ["register", "reduce_tensor", "reduce_storage", "reduce_event", "rebuild_npu_tensor", "rebuild_npu_event"]

# Counter slot -> the storage kept for the receiver that holds it.
_sent: dict[int, torch.UntypedStorage] = {}
_sent_lock = threading.Lock()


def _let_go_of_released() -> None:
    with _sent_lock:
        for slot in [slot for slot in _sent if _C._sent_counter(slot) <= 0]:
            del _sent[slot]
            _C._release_counter_slot(slot)


def reduce_tensor(tensor: torch.Tensor):
    if tensor.device.type != "npu" or tensor.layout != torch.strided:
        return _torch_reductions.reduce_tensor(tensor)
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, "
            "since autograd does not support crossing process boundaries.  "
            "If you just want to transfer the data, call detach() on the tensor "
            "before serializing (e.g., putting it on the queue)."
        )
    torch.utils.hooks.warn_if_has_hooks(tensor)
    _let_go_of_released()
    storage = tensor.untyped_storage()
    nbytes = storage.nbytes()
    handle = counter = None
    slot = device = -1
    offset_in_ranges = 0
    if nbytes > 0:
        found = _C._share_device_memory(storage.data_ptr(), nbytes)
        if found is None:
            raise RuntimeError(
                "this npu tensor's memory was not handed out by this process's npu allocator "
                "(it was received from another process, or wraps external memory), so it cannot "
                "be sent on; send a clone() of it"
            )
        device, fd, offset_in_ranges, ranges, counter_fd, slot = found
        with _sent_lock:
            _sent[slot] = storage
        handle, counter = (DupFd(fd), ranges), DupFd(counter_fd)
    # Ascend's (and CUDA's) argument list: the storage is named by a handle (here the device
    # memory file and the page ranges holding the storage), the sender's reference counter
    # by a handle and an offset (here the counter file and its slot). Work on the simulated
    # device is finished when it is queued, so no event needs to be waited for.
    return (
        rebuild_npu_tensor,
        (type(tensor), tuple(tensor.size()), tuple(tensor.stride()), tensor.storage_offset(), type(storage),
         tensor.dtype, tensor.device.index if device < 0 else device, handle, nbytes, offset_in_ranges,
         tensor.requires_grad, counter, slot, None, False),
    )


def rebuild_npu_tensor(tensor_cls, tensor_size, tensor_stride, tensor_offset, storage_cls, dtype, storage_device,
                       storage_handle, storage_size_bytes, storage_offset_bytes, requires_grad, ref_counter_handle,
                       ref_counter_offset, event_handle, event_sync_required):
    """The npu tensor another process sent (``torch_npu.multiprocessing.reductions`` names it
    with Ascend's parameter list): its storage is mapped from the sender's device memory, so
    both processes see the same memory."""
    device = torch.device("npu", storage_device)
    if event_sync_required and event_handle is not None:
        torch.npu.Event.from_ipc_handle(device, event_handle).synchronize()
    if storage_handle is None or storage_size_bytes == 0:
        tensor = torch.empty_strided(tensor_size, tensor_stride, dtype=dtype, device=device)
    else:
        memory, ranges = storage_handle
        fd, counter_fd = memory.detach(), ref_counter_handle.detach()
        try:
            raw = _C._import_device_memory(fd, storage_device, storage_offset_bytes, ranges, storage_size_bytes,
                                           counter_fd, ref_counter_offset)
        finally:
            os.close(fd)
            os.close(counter_fd)
        tensor = torch.empty((0,), dtype=dtype, device=raw.device)
        tensor.set_(raw.untyped_storage(), tensor_offset, tensor_size, tensor_stride)
    if tensor_cls is torch.nn.Parameter:
        return torch.nn.Parameter(tensor, requires_grad=requires_grad)
    tensor.requires_grad = requires_grad
    return tensor


def reduce_event(event):
    """An npu event travels as its device and ``ipc_handle()`` (``interprocess=True`` events)."""
    return (rebuild_npu_event, (event.device.index, event.ipc_handle()))


def rebuild_npu_event(device, handle):
    """The event another process sent: ``torch.npu.Event.from_ipc_handle(device, handle)``."""
    from torch_npu.npu.streams import Event

    return Event.from_ipc_handle(device, handle)


def reduce_storage(storage: torch.UntypedStorage):
    # CUDA refuses a bare storage (its IPC is per tensor); say so for npu the same way.
    if storage.device.type == "npu":
        raise RuntimeError("Cannot pickle npu storage; try pickling an npu tensor instead")
    return _torch_reductions.reduce_storage(storage)


def register() -> None:
    """Put ``reduce_tensor`` (and ``reduce_storage``) in ForkingPickler's table for the
    classes torch registers its own for."""
    for cls in (*torch._tensor_classes, torch.Tensor, torch.nn.parameter.Parameter):
        ForkingPickler.register(cls, reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, reduce_storage)
    from torch_npu.npu.streams import Event

    ForkingPickler.register(Event, reduce_event)
