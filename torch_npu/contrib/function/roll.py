"""``roll``: Swin Transformer's cyclic shift of a ``(N, H, W, C)`` window map, as Ascend's
contrib API offers it (a gather along the flattened ``H * W`` axis, which its device runs
faster than ``torch.roll``).

``roll(x, shifts=(sh, sw), dims=(1, 2))`` equals ``torch.roll(x, shifts, dims)``. Ascend's
version always rolls H and W whatever ``dims`` says; here ``dims`` must name them (``(1, 2)``
or ``(-3, -2)``), so that no other request is silently answered with that one. The gather
indices are computed once per ``(H, W, shifts, device)`` and kept; the gradient is the
gather by the inverse permutation.
"""
from __future__ import annotations

import threading

import torch

__all__ = ["roll"]

_indices: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
_indices_lock = threading.Lock()


def _roll_indices(height: int, width: int, shifts: tuple[int, int], device: torch.device):
    key = (height, width, shifts, device)
    with _indices_lock:
        found = _indices.get(key)
        if found is None:
            forward = torch.roll(torch.arange(height * width).reshape(height, width), shifts, (0, 1)).reshape(-1)
            backward = torch.empty_like(forward)
            backward[forward] = torch.arange(height * width)
            found = _indices[key] = (forward.to(device), backward.to(device))
    return found


class _RollByIndexSelect(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, forward_index, backward_index):
        n, h, w, c = x.shape
        ctx.save_for_backward(backward_index)
        return x.reshape(n, h * w, c).index_select(1, forward_index).reshape(n, h, w, c)

    @staticmethod
    def backward(ctx, grad):
        (backward_index,) = ctx.saved_tensors
        n, h, w, c = grad.shape
        return grad.reshape(n, h * w, c).index_select(1, backward_index).reshape(n, h, w, c), None, None


def _pair(name: str, value) -> tuple[int, int]:
    try:
        pair = tuple(int(v) for v in value)
    except TypeError:
        raise TypeError(f"roll: {name} must be a pair of ints (H, W), got {value!r}") from None
    if len(pair) != 2:
        raise ValueError(f"Expected len({name}) == 2 (roll: got {value!r}; the H and W axes of (N, H, W, C))")
    return pair


def roll(x, shifts, dims):
    """``x`` rolled by ``shifts`` along its H and W axes.

    Args:
        x (Tensor): ``(N, H, W, C)``.
        shifts (tuple[int, int]): places to shift along H and W.
        dims (tuple[int, int]): the axes, ``(1, 2)``.

    Returns:
        Tensor: the shifted ``x``.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"roll: x must be a tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(f"Expected x.dim() == 4 (roll: x must be (N, H, W, C), got shape {tuple(x.shape)})")
    shifts = _pair("shifts", shifts)
    axes = tuple(d % 4 for d in _pair("dims", dims))
    if axes != (1, 2):
        raise ValueError(
            f"roll: dims={tuple(dims)} is not supported; this roll shifts the H and W axes of (N, H, W, C), "
            "dims=(1, 2) (use torch.roll for other axes)"
        )
    _n, h, w, _c = x.shape
    forward_index, backward_index = _roll_indices(h, w, shifts, x.device)
    return _RollByIndexSelect.apply(x, forward_index, backward_index)
