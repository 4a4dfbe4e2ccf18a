"""Tensor combination: many same-dtype tensors re-homed into one flat buffer.

Ascend's fused optimizers update every parameter of a group with one kernel over one
contiguous buffer. ``npu_combine_tensors`` makes that buffer and re-points each tensor
at its slice of it (``Tensor.set_`` onto the buffer's storage), so the original tensor
objects stay the ones the model and autograd hold, and writing through either side is
seen by the other. The other two functions read a slice back and check membership.
"""
from __future__ import annotations

import torch

__all__ = ["npu_combine_tensors", "get_part_combined_tensor", "is_combined_tensor_valid"]


def _check_tensor_list(list_of_tensor, what: str) -> None:
    if not isinstance(list_of_tensor, (list, tuple)):
        raise TypeError(f"{what}: list_of_tensor must be a list of tensors, got {type(list_of_tensor).__name__}")
    for i, t in enumerate(list_of_tensor):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what}: element {i} is a {type(t).__name__}, not a tensor")
    if not list_of_tensor:
        return
    first = list_of_tensor[0]
    for i, t in enumerate(list_of_tensor):
        if t.dtype != first.dtype:
            raise TypeError(f"{what}: all tensors must share one dtype; element 0 is {first.dtype}, "
                            f"element {i} is {t.dtype}")
        if t.device != first.device:
            raise ValueError(f"{what}: all tensors must be on one device; element 0 is on {first.device}, "
                             f"element {i} on {t.device}")
        if not t.is_contiguous():
            raise ValueError(f"{what}: element {i} is not contiguous; call .contiguous() on it first "
                             "(a combined tensor holds each tensor as one contiguous slice)")


def npu_combine_tensors(list_of_tensor, require_copy_value=True):
    """One flat, contiguous tensor holding every tensor of ``list_of_tensor`` in order.

    Each input tensor is re-pointed at its slice of the result (same object, same shape,
    new memory), so later reads and in-place writes of the inputs go to the combined tensor.
    With ``require_copy_value=False`` the values are not carried over (the slices start as
    zeros), which saves a copy when the caller overwrites them anyway. An empty list gives
    ``None``.
    """
    _check_tensor_list(list_of_tensor, "npu_combine_tensors")
    if len(list_of_tensor) == 0:
        return None
    first = list_of_tensor[0]
    total = sum(t.numel() for t in list_of_tensor)
    combined = torch.zeros(total, dtype=first.dtype, device=first.device)
    storage = combined.untyped_storage()
    offset = 0
    with torch.no_grad():
        for t in list_of_tensor:
            n = t.numel()
            if require_copy_value:
                combined[offset:offset + n].copy_(t.reshape(-1))
            # set_ keeps the tensor object (a Parameter stays the model's Parameter, a grad
            # stays the .grad autograd accumulates into) and swaps its memory for the slice.
            t.set_(storage, offset, t.size(), t.stride())
            offset += n
    return combined


def get_part_combined_tensor(combined_tensor, index, size):
    """The ``size`` elements of ``combined_tensor`` starting at element ``index`` (a view)."""
    if not isinstance(combined_tensor, torch.Tensor):
        raise TypeError(f"get_part_combined_tensor: combined_tensor must be a tensor, got {type(combined_tensor).__name__}")
    index, size = int(index), int(size)
    if index < 0 or size < 0:
        raise ValueError(f"get_part_combined_tensor: index ({index}) and size ({size}) must be non-negative")
    if index + size > combined_tensor.numel():
        raise ValueError(f"get_part_combined_tensor: index + size ({index} + {size}) exceeds the "
                         f"{combined_tensor.numel()} elements of the combined tensor")
    return combined_tensor.reshape(-1)[index:index + size]


def is_combined_tensor_valid(combined_tensor, list_of_tensor):
    """True when every tensor of ``list_of_tensor`` lives inside ``combined_tensor``'s memory."""
    _check_tensor_list(list_of_tensor, "is_combined_tensor_valid")
    if combined_tensor is None or not isinstance(combined_tensor, torch.Tensor):
        return False
    if len(list_of_tensor) == 0:
        return True
    start = combined_tensor.data_ptr()
    end = start + combined_tensor.numel() * combined_tensor.element_size()
    for t in list_of_tensor:
        if t.dtype != combined_tensor.dtype or t.device != combined_tensor.device:
            return False
        begin = t.data_ptr()
        if not (start <= begin and begin + t.numel() * t.element_size() <= end):
            return False
    return True
