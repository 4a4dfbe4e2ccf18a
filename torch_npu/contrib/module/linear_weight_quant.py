"""``LinearWeightQuant``: the weight-only quantised linear layer over
``torch_npu.npu_weight_quant_batchmatmul``.

``y = x @ ((weight + antiquant_offset) * antiquant_scale).T + bias`` with a float16/bfloat16
``x (M, in_features)``, an int8 ``weight (out_features, in_features)`` and per-tensor,
per-channel (``(out_features,)`` or ``(out_features, 1)``) or, with ``antiquant_group_size``,
per-group (``(out_features, ceil(in_features / group))``) scale and offset; with
``quant_scale`` (float32) the result is requantised to int8 (``+ quant_offset``). The
parameters are placeholders filled with the quantised model's values, as on Ascend.
"""
import torch
from torch import Tensor, nn
from torch.nn.parameter import Parameter

from ._quant_checks import check_input

__all__ = ["LinearWeightQuant"]


def _as_k_by_n(t):
    """Ascend's layer stores per-channel tensors as (N, ...); the operator takes (..., N)."""
    return None if t is None else (t.transpose(-1, -2) if t.dim() == 2 else t)


class LinearWeightQuant(nn.Module):
    in_features: int
    out_features: int
    weight: Tensor
    antiquant_scale: Tensor
    antiquant_offset: Tensor
    quant_scale: Tensor
    quant_offset: Tensor

    def __init__(self, in_features, out_features, bias: bool = True, device=None, dtype=None,
                 antiquant_offset: bool = False, quant_scale: bool = False, quant_offset: bool = False,
                 antiquant_group_size: int = 0, inner_precise: int = 0, weight_dtype=None) -> None:
        super().__init__()
        if inner_precise not in (0, 1):
            raise ValueError(f"LinearWeightQuant: inner_precise={inner_precise} must be 0 (high precision) or 1 "
                             "(high performance)")
        self.in_features = in_features
        self.out_features = out_features
        compute_dtype = dtype if dtype is not None else torch.float16

        def placeholder(shape, dtype_, fill):
            return Parameter(torch.full(shape, fill, dtype=dtype_, device=device), False)

        self.weight = placeholder((out_features, in_features), torch.int8, 0)
        self.antiquant_scale = placeholder((out_features,), compute_dtype, 1)
        self.antiquant_offset = placeholder((out_features,), compute_dtype, 0) if antiquant_offset else None
        self.quant_scale = placeholder((out_features,), torch.float32, 1) if quant_scale else None
        self.quant_offset = placeholder((out_features,), torch.float32, 0) if quant_offset else None
        self.bias = placeholder((out_features,), compute_dtype, 0) if bias else None
        self.antiquant_group_size = antiquant_group_size
        self.inner_precise = inner_precise
        self.weight_dtype = weight_dtype

    def forward(self, x: Tensor) -> Tensor:
        check_input("LinearWeightQuant", "x", x, (torch.float16, torch.bfloat16), self.in_features)
        extra = {} if self.weight_dtype is None else {"weight_dtype": self.weight_dtype}
        return torch.ops.npu.npu_weight_quant_batchmatmul(
            x, self.weight.transpose(-1, -2), _as_k_by_n(self.antiquant_scale), _as_k_by_n(self.antiquant_offset),
            _as_k_by_n(self.quant_scale), _as_k_by_n(self.quant_offset), _as_k_by_n(self.bias),
            self.antiquant_group_size, self.inner_precise, **extra)
