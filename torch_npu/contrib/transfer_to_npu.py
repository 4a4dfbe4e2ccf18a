"""Run an unmodified CUDA script on npu: put ``import torch_npu.contrib.transfer_to_npu`` first.

From then on ``device="cuda"``, ``.cuda()``, ``.to("cuda")``, ``torch.cuda.*`` (availability,
devices, synchronisation, streams, events, graphs, memory, random state, amp; every function
and class that takes a device accepts ``"cuda:N"``/``torch.device("cuda", N)``),
``torch.Generator("cuda")``, ``torch.autocast("cuda")`` and the autocast state functions,
``custom_fwd(device_type="cuda")``, ``torch.load(..., map_location="cuda")`` (and checkpoints
saved on a GPU), ``storage.cuda()``, ``torch.cuda.nvtx`` ranges (npu profiler ranges),
``nn.DataParallel`` across the npu devices, ``dist.is_nccl_available()`` and
``init_process_group("nccl")`` mean the npu device and the ``hccl`` backend, in every thread,
and ``torch.compile`` compiles for npu. Tensors still report ``device.type == "npu"``.

This is torch_npu's one opt-in patch group (see ``torch_npu._patches.transfer_to_npu`` for
what it changes and why); nothing of it happens unless this module is imported.
"""
from __future__ import annotations

import torch_npu  # noqa: F401  (the npu device must exist first)
from torch_npu import _patches

_patches.apply_group("transfer_to_npu")
