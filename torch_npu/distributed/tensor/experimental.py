"""torch_npu.distributed.tensor.experimental: ``context_parallel`` for npu device meshes.

Context parallelism shards the sequence dimension of the given buffers over a device
mesh and swaps SDPA for its ring-attention form while the context is active; torch's
implementation is device-generic (DTensor over the mesh's process group), so Ascend's
name forwards to it.
"""
from __future__ import annotations

import contextlib

import torch

__all__ = ["context_parallel"]


@contextlib.contextmanager
def context_parallel(mesh: "torch.distributed.device_mesh.DeviceMesh", *, buffers=None, buffer_seq_dims=None,
                     no_restore_buffers=None):
    """torch's ``torch.distributed.tensor.experimental.context_parallel``."""
    from torch.distributed.tensor.experimental import context_parallel as torch_context_parallel

    with torch_context_parallel(mesh, buffers=buffers, buffer_seq_dims=buffer_seq_dims,
                                no_restore_buffers=no_restore_buffers):
        yield
