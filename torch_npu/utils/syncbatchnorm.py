"""SyncBatchNorm: the autograd function behind ``torch.nn.SyncBatchNorm`` on npu.

torch's own function calls ``batch_norm_stats``/``batch_norm_elemt``/... which have CUDA
kernels only, so on the simulated npu (CPU kernels) it cannot run. This function computes
the same thing from ordinary ops: per-channel sums and squared sums all-reduced over the
process group give the global mean and biased variance; the running statistics take the
unbiased variance; backward all-reduces the two per-channel grad sums. The weight and
bias grads stay local, as in torch (DDP averages them with the other grads).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["SyncBatchNorm"]


def _all_reduce(tensor, process_group, world_size):
    if world_size > 1 and dist.is_available() and dist.is_initialized():
        dist.all_reduce(tensor, group=process_group)
    return tensor


class SyncBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(self, input_tensor, weight, bias, running_mean, running_var, eps, momentum, process_group, world_size):
        if input_tensor.dim() < 2:
            raise ValueError(f"SyncBatchNorm: expected an input of at least 2 dims (N, C, ...), got {input_tensor.dim()}")
        x = input_tensor.contiguous()
        channels = x.size(1)
        dims = [d for d in range(x.dim()) if d != 1]
        shape = [1, channels] + [1] * (x.dim() - 2)
        acc = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        local_count = x.numel() // channels
        stats = torch.cat([acc.sum(dims), (acc * acc).sum(dims),
                           torch.full((1,), float(local_count), dtype=acc.dtype, device=acc.device)])
        stats = _all_reduce(stats, process_group, world_size)
        total = stats[-1]
        mean = stats[:channels] / total
        var = (stats[channels:2 * channels] / total - mean * mean).clamp_(min=0)
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None and momentum is not None:
            with torch.no_grad():
                unbiased = var * total / (total - 1).clamp(min=1)
                running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
        out = (acc - mean.view(shape)) * invstd.view(shape)
        if weight is not None:
            out = out * weight.view(shape) + bias.view(shape)
        self.save_for_backward(x, weight, mean, invstd, total)
        self.process_group = process_group
        self.world_size = world_size
        return out.to(x.dtype)

    @staticmethod
    def backward(self, grad_output):
        x, weight, mean, invstd, total = self.saved_tensors
        channels = x.size(1)
        dims = [d for d in range(x.dim()) if d != 1]
        shape = [1, channels] + [1] * (x.dim() - 2)
        acc = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        dy = grad_output.contiguous().to(acc.dtype)
        xmu = acc - mean.view(shape)
        sums = torch.cat([dy.sum(dims), (dy * xmu).sum(dims)])
        grad_weight = (sums[channels:] * invstd).to(weight.dtype) if weight is not None else None
        grad_bias = sums[:channels].to(weight.dtype) if weight is not None else None
        sums = _all_reduce(sums.clone(), self.process_group, self.world_size)
        mean_dy = sums[:channels] / total
        mean_dy_xmu = sums[channels:] / total
        scale = invstd if weight is None else invstd * weight.to(acc.dtype)
        grad_input = (dy - mean_dy.view(shape) - xmu * (invstd * invstd * mean_dy_xmu).view(shape)) * scale.view(shape)
        return grad_input.to(x.dtype), grad_weight, grad_bias, None, None, None, None, None, None
