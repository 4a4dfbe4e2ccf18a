"""What every distributed test worker shares: joining the group on its npu, and reporting."""
from __future__ import annotations

import json
import os
import sys

import torch


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def use_local_npu() -> torch.device:
    import torch_npu  # noqa: F401

    torch.npu.set_device(local_rank())
    return torch.device("npu", local_rank())


def report(**data) -> None:
    """One RESULT line for the launcher (values must be JSON-serialisable)."""
    import torch.distributed as dist

    rank = dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", "0"))
    # One write() per line: ranks share the launcher's pipe, and separate writes of the text
    # and its newline could interleave with another rank's line.
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), ("RESULT " + json.dumps({"rank": rank, **data}) + "\n").encode())


def listed(t: torch.Tensor) -> list:
    return t.detach().cpu().tolist()


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equal values (and dtype and shape), wherever the tensors live."""
    a, b = a.detach().cpu(), b.detach().cpu()
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def fail(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
    raise SystemExit(1)


_TORCHVISION_LIB = None


def define_torchvision_schemas() -> None:
    """transformers imports torchvision, whose wheel here is a CUDA build: its C++ operators do
    not load, and its import registers fake kernels for torchvision::nms and ::qnms, which
    fails unless their schemas exist. Define them (nothing happens when they exist)."""
    global _TORCHVISION_LIB
    schemas = {"nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
               "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"}
    missing = [s for name, s in schemas.items() if not torch._C._dispatch_has_kernel(f"torchvision::{name}")
               and not hasattr(torch.ops.torchvision, name)]
    if missing:
        _TORCHVISION_LIB = torch.library.Library("torchvision", "FRAGMENT")
        for schema in missing:
            _TORCHVISION_LIB.define(schema)
