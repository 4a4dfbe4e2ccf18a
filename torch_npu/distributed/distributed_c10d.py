"""The c10d-level names Ascend adds: ``is_hccl_available`` and ``reinit_process_group``."""
from __future__ import annotations

import torch.distributed as dist

from torch_npu.distributed._backend import hccl_backend_of, is_hccl_available

__all__ = ["is_hccl_available", "reinit_process_group"]


def reinit_process_group(group=None, rebuild_link=True):
    """Re-establishes the hccl communicator of ``group`` (default: the default group).

    On Ascend this tears down (``rebuild_link=True``) or keeps the HCCL links of a group
    after a device fault. The simulated links are shared memory plus a Gloo transport that
    a fault cannot break without ending the group, so a healthy group is what this finds:
    it checks that ``group`` is an initialised hccl group of this rank, waits for the
    rank's queued npu work, and leaves the links as they are.
    """
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("reinit_process_group: the default process group is not initialised; "
                           "call torch.distributed.init_process_group('hccl') first")
    if not isinstance(rebuild_link, bool):
        raise TypeError(f"reinit_process_group: rebuild_link must be a bool, got {type(rebuild_link).__name__}")
    if group is not None and group is dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError("reinit_process_group: this rank is not a member of the group")
    hccl_backend_of(group)  # raises ValueError when the group has no hccl backend for npu
    import torch

    torch.npu.synchronize()
