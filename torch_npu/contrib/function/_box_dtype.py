"""The dtype rule Ascend's contrib box helpers apply before calling a box operator.

Ascend's ``box_dtype_check`` tests ``box not in [torch.float, torch.half]`` with the box
*tensor* on the left, a comparison that never matches a dtype, so every box is cast to
float32, half boxes included; the operators then compute and answer in float32. Code
written for Ascend sees float32 results from these helpers whatever it passes, and so it
does here: the rule lives in one place so that every helper applies the same one.
"""
from __future__ import annotations

import torch


def to_float32_boxes(op: str, name: str, box) -> torch.Tensor:
    if not isinstance(box, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a tensor of boxes, got {type(box).__name__}")
    if box.is_complex():
        raise TypeError(f"{op}: {name} must hold real box coordinates, got {box.dtype}")
    return box.float()
