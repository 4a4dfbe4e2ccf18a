"""``LinearQuant``: the A8W8 / A4W4 quantised linear layer over ``torch_npu.npu_quant_matmul``.

``y = dequant(x @ weight.T + bias) `` with int8 (or int4 packed eight to an int32) ``x`` and
``weight (out_features, in_features)``, an int32 ``bias``, the float32 per-channel ``scale``,
an optional ``offset`` (int8 output) and ``pertoken_scale`` (one per row of ``x``);
``output_dtype`` None gives int8. The parameters are placeholders to be filled with the
quantised model's values (``layer.weight.data = ...``), as on Ascend.

On the simulator ``scale`` stays float32: the int64 form made by ``npu_trans_quant_param`` on
Ascend is not read (the operator says so).
"""
import torch
from torch import Tensor, nn
from torch.nn.parameter import Parameter

from ._quant_checks import check_input

__all__ = ["LinearQuant"]


class LinearQuant(nn.Module):
    in_features: int
    out_features: int
    weight: Tensor
    scale: Tensor
    offset: Tensor
    pertoken_scale: Tensor
    bias: Tensor

    _input_dtypes = (torch.int8, torch.int32)

    def __init__(self, in_features: int, out_features: int, *, bias: bool = True, offset: bool = False,
                 pertoken_scale: bool = False, device=None, dtype=None, output_dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.output_dtype = output_dtype
        self.weight = Parameter(torch.zeros((out_features, in_features), dtype=torch.int8, device=device), False)
        self.scale = Parameter(torch.ones(out_features, dtype=torch.float32, device=device), False)
        self.offset = Parameter(torch.zeros(out_features, dtype=torch.float32, device=device), False) if offset else None
        self.pertoken_scale = (Parameter(torch.ones(out_features, dtype=torch.float32, device=device), False)
                               if pertoken_scale else None)
        self.bias = Parameter(torch.zeros(out_features, dtype=torch.int32, device=device), False) if bias else None

    def forward(self, linear_quant_input: Tensor) -> Tensor:
        import torch_npu

        layer = type(self).__name__
        if isinstance(linear_quant_input, Tensor) and linear_quant_input.dtype in self._input_dtypes \
                and linear_quant_input.dtype != self.weight.dtype:
            raise TypeError(f"{layer}: input and weight must both be int8 (A8W8) or both int32 (packed A4W4), got "
                            f"{linear_quant_input.dtype} and {self.weight.dtype}")
        packed = self.weight.dtype == torch.int32  # int4 values, eight to a word
        check_input(layer, "linear_quant_input", linear_quant_input, self._input_dtypes,
                    self.in_features // 8 if packed else self.in_features)
        weight = self.weight.transpose(-2, -1)
        return torch_npu.npu_quant_matmul(linear_quant_input, weight, self.scale, offset=self.offset,
                                          pertoken_scale=self.pertoken_scale, bias=self.bias,
                                          output_dtype=self.output_dtype)
