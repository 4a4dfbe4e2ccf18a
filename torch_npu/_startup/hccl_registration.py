"""Registers the ``hccl`` process-group backend with torch.distributed at ``import torch_npu``.

Registration only fills torch.distributed's backend tables (``import torch`` has already
imported torch.distributed), so it is cheap. The backend itself lives in
``torch_npu.distributed``, which the creator imports when the first hccl group is made:
``import torch_npu`` loads no distributed module of ours.
"""
from __future__ import annotations

import torch

BACKEND_NAME = "hccl"


def _create_hccl_backend(dist_backend_opts, backend_options):
    """The creator torch.distributed calls for every hccl group (extended API)."""
    from torch_npu.distributed import _backend

    return _backend.create_from_c10d(dist_backend_opts, backend_options)


def register() -> None:
    dist = torch.distributed
    if not dist.is_available():
        return
    plugin = dist.Backend._plugins.get(BACKEND_NAME.upper())
    if plugin is not None and plugin.creator_fn is _create_hccl_backend:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_hccl_backend, extended_api=True, devices=["npu"])
