"""torch_npu.distributed.fsdp: ``fully_shard`` for npu models.

PyTorch's FSDP2 ``fully_shard`` already works with npu modules over hccl (it uses the
device's generic stream and event APIs); Ascend's name forwards to it, so code written
for Ascend and for CUDA shard the same way.
"""
from __future__ import annotations

__all__ = ["fully_shard"]


def fully_shard(*args, **kwargs):
    """``torch.distributed.fsdp.fully_shard(module, *, mesh=None, ...)``."""
    from torch.distributed.fsdp import fully_shard as torch_fully_shard

    return torch_fully_shard(*args, **kwargs)
