"""Checks shared by the quantised layers: the layer's own name in the message, and what to fix."""
import torch


def check_input(layer: str, name: str, x, allowed, features: int) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{layer}: {name} must be a Tensor, got {type(x).__name__}")
    if x.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"{layer}: {name} has dtype {str(x.dtype).replace('torch.', '')}; supported: {names}")
    if x.dim() < 2 or x.shape[-1] != features:
        raise ValueError(f"{layer}: {name} must be (..., {features}) (in_features last), got {tuple(x.shape)}")
