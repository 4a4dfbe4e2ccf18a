"""``matmul_transpose(a, b)``: ``a @ b.transpose(-2, -1)`` (attention scores ``q @ k^T``) as
Ascend's contrib API offers it, with the backward it defines: ``grad_a = grad @ b`` and
``grad_b = grad^T @ a``, both through ``torch_npu.npu_bmmV2``. Inputs must have the same
batch dimensions (Ascend's kernel does not broadcast them).
"""
from __future__ import annotations

import torch

import torch_npu

__all__ = ["matmul_transpose"]


class _MatmulTranspose(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor1, tensor2):
        for name, value in (("tensor1", tensor1), ("tensor2", tensor2)):
            if not isinstance(value, torch.Tensor) or value.dim() < 2:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"matmul_transpose: {name} must be a tensor of at least 2 dimensions, got {got}")
        if tensor1.shape[:-2] != tensor2.shape[:-2] or tensor1.shape[-1] != tensor2.shape[-1]:
            raise ValueError(
                f"matmul_transpose: computes tensor1 @ tensor2.transpose(-2, -1), so both need the same batch "
                f"dimensions and last dimension (no broadcasting); got {tuple(tensor1.shape)} and "
                f"{tuple(tensor2.shape)}"
            )
        ctx.save_for_backward(tensor1, tensor2)
        return torch.matmul(tensor1, tensor2.transpose(-2, -1))

    @staticmethod
    def backward(ctx, grad):
        tensor1, tensor2 = ctx.saved_tensors
        grad1 = torch_npu.npu_bmmV2(grad, tensor2, []) if ctx.needs_input_grad[0] else None
        grad2 = torch_npu.npu_bmmV2(grad.transpose(-2, -1), tensor1, []) if ctx.needs_input_grad[1] else None
        return grad1, grad2


def matmul_transpose(*args, **kwargs):
    """``tensor1 @ tensor2.transpose(-2, -1)``, called as ``matmul_transpose(tensor1, tensor2)``."""
    return _MatmulTranspose.apply(*args, **kwargs)
