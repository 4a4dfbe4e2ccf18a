"""Dropout keep-masks drawn from the device's generator, shared by the dropout layers here.

A keep-mask is a uint8 tensor, 1 where the element is kept (probability ``1 - p``) and 0
where it is dropped; applying it scales the kept elements by ``1 / (1 - p)`` so that the
expectation is unchanged. Drawn with ``torch.rand`` on the target device, so
``torch.manual_seed`` (which seeds every npu generator) makes a run reproducible.
"""
import torch


def check_probability(owner: str, p) -> float:
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{owner}: the dropout probability must be a number in [0, 1], got {p!r}")
    return float(p)


def draw_keep_mask(shape, p: float, device) -> torch.Tensor:
    return (torch.rand(tuple(shape), device=device) >= p).to(torch.uint8)


def apply_keep_mask(x: torch.Tensor, mask: torch.Tensor, p: float) -> torch.Tensor:
    if p >= 1.0:
        return x * 0
    return x * mask.to(x.dtype) * (1.0 / (1.0 - p))
