"""``LinearA8W8Quant``: ``LinearQuant`` restricted to int8 activations and weights (Ascend's
older name for the A8W8 layer, kept for the model code that imports it)."""
import torch

from .linear_quant import LinearQuant

__all__ = ["LinearA8W8Quant"]


class LinearA8W8Quant(LinearQuant):
    _input_dtypes = (torch.int8,)

    def __init__(self, in_features: int, out_features: int, *, bias: bool = True, offset: bool = False,
                 pertoken_scale: bool = False, device=None, dtype=None, output_dtype=None) -> None:
        super().__init__(in_features, out_features, bias=bias, offset=offset, pertoken_scale=pertoken_scale,
                         device=device, dtype=dtype, output_dtype=output_dtype)

    def forward(self, linear_quant_input: torch.Tensor) -> torch.Tensor:
        return super().forward(linear_quant_input)
