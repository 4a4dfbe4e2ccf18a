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
    print("RESULT " + json.dumps({"rank": rank, **data}), flush=True)


def listed(t: torch.Tensor) -> list:
    return t.detach().cpu().tolist()


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equal values (and dtype and shape), wherever the tensors live."""
    a, b = a.detach().cpu(), b.detach().cpu()
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def fail(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
    raise SystemExit(1)
