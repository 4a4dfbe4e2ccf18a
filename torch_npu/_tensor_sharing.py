"""Sharing npu tensors with other processes (torch.multiprocessing, DataLoader workers).

torch.multiprocessing pickles tensors with the reducers it puts in multiprocessing's
``ForkingPickler`` table: cuda tensors go through CUDA IPC, every other device through
``_share_fd_cpu_``, which refuses npu storages, and ``torch/multiprocessing/reductions.py``
has no hook for another device. So ``register()`` (run by ``import torch_npu``) puts a
reducer in that same table for torch's tensor classes: an npu tensor is sent as the pages
of its device's memory file that hold its storage (``csrc/device_memory_file.h``), any other
tensor goes to torch's reducer unchanged. The receiver maps those pages: both processes
see the same memory and each other's writes, as with CUDA. No torch attribute is replaced;
the table is multiprocessing's documented registry. Delete this module when PyTorch's
reductions let a PrivateUse1 backend share its storages.

As CUDA does (its IPC reference counter), the sender keeps every storage it sent until the
receiver lets go of it, so the memory is not reused under the receiver's feet.
"""
from __future__ import annotations

import os
import threading
from multiprocessing.reduction import DupFd, ForkingPickler

import torch
from torch.multiprocessing import reductions as _torch_reductions

import torch_npu._C as _C

__all__ = ["register", "reduce_tensor", "reduce_storage", "rebuild_npu_tensor"]

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
    share = None
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
        share = (device, DupFd(fd), offset_in_ranges, ranges, DupFd(counter_fd), slot)
    return (
        rebuild_npu_tensor,
        (type(tensor), share, nbytes, tensor.device.index, tensor.dtype, tuple(tensor.size()),
         tuple(tensor.stride()), tensor.storage_offset(), tensor.requires_grad),
    )


def rebuild_npu_tensor(cls, share, nbytes, device_index, dtype, size, stride, storage_offset, requires_grad):
    device = torch.device("npu", device_index)
    if share is None:
        tensor = torch.empty_strided(size, stride, dtype=dtype, device=device)
    else:
        index, memory, offset_in_ranges, ranges, counter, slot = share
        fd, counter_fd = memory.detach(), counter.detach()
        try:
            raw = _C._import_device_memory(fd, index, offset_in_ranges, ranges, nbytes, counter_fd, slot)
        finally:
            os.close(fd)
            os.close(counter_fd)
        tensor = torch.empty((0,), dtype=dtype, device=raw.device)
        tensor.set_(raw.untyped_storage(), storage_offset, size, stride)
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(tensor, requires_grad=requires_grad)
    tensor.requires_grad = requires_grad
    return tensor


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
