"""Helpers of Ascend's distributed tests: skip without enough npus, and a process group
around a test.

``init_pg`` joins the default process group (``hccl`` by default, the npu backend this
package registers), ``with_comms`` wraps a test method between joining and leaving it,
``skipIfUnsupportMultiNPU(n)`` skips a test when fewer than ``n`` npu devices exist
(``TORCH_NPU_DEVICE_COUNT`` sets how many the simulator has), and ``TestSkip`` /
``TEST_SKIPS`` are the exit codes multi-process tests report a skip with.
"""
from __future__ import annotations

import functools
import os
import tempfile
import unittest
from typing import Any, Callable, NamedTuple

import torch

__all__ = ["TestSkip", "TEST_SKIPS", "skipIfUnsupportMultiNPU", "with_comms", "init_pg"]


class TestSkip(NamedTuple):
    """A reason a test was skipped and the exit code a worker process reports it with."""

    exit_code: int
    message: str


TestSkip.__test__ = False  # not a test class

TEST_SKIPS = {
    "multi-npu": TestSkip(75, "Need at least 2 NPU devices"),
    "hccl": TestSkip(76, "c10d not compiled with HCCL support"),
    "skipIfRocm": TestSkip(78, "Test skipped for ROCm"),
    "no_peer_access": TestSkip(79, "Test skipped because no NPU peer access"),
    "generic": TestSkip(86, "Test skipped at subprocess level, look at subprocess log for skip reason"),
}


def skipIfUnsupportMultiNPU(npu_number_needed) -> Callable:  # noqa: N802  (Ascend's name)
    """Skip the decorated test when fewer than ``npu_number_needed`` npu devices exist."""
    if not isinstance(npu_number_needed, int) or isinstance(npu_number_needed, bool) or npu_number_needed < 1:
        raise ValueError(f"npu_number_needed must be a positive int, got {npu_number_needed!r}")

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            available = torch.npu.device_count()
            if available < npu_number_needed:
                raise unittest.SkipTest(f"Need at least {npu_number_needed} NPU devices, found {available}")
            return func(*args, **kwargs)

        return wrapper

    return decorate


def init_pg(backend: str = "hccl", world_size=1, rank=0, file_name="file://") -> None:
    """Join the default process group: ``backend`` over a file store at ``file_name``
    (a ``file://`` URL; the bare default gets a fresh temporary file)."""
    import torch.distributed as dist

    if not isinstance(file_name, str) or not file_name.startswith("file://"):
        raise ValueError(f"file_name must be a file:// URL, got {file_name!r}")
    if file_name == "file://":
        handle, path = tempfile.mkstemp(prefix="torch_npu_pg_")
        os.close(handle)
        file_name = f"file://{path}"
    dist.init_process_group(backend=backend, init_method=file_name, world_size=world_size, rank=rank)


def with_comms(func) -> Callable:
    """Run a test method inside a process group: before it ``init_pg`` with the test's
    ``backend``/``world_size``/``rank``/``file_name`` attributes when it has them (``hccl``,
    1, 0 and a fresh file otherwise), after it ``destroy_process_group``."""

    @functools.wraps(func)
    def wrapper(self, *args: Any, **kwargs: Any) -> Any:
        import torch.distributed as dist

        file_name = getattr(self, "file_name", None)
        init_pg(
            backend=getattr(self, "backend", "hccl"),
            world_size=getattr(self, "world_size", 1),
            rank=getattr(self, "rank", 0),
            file_name=f"file://{file_name}" if file_name and not str(file_name).startswith("file://")
            else (file_name or "file://"),
        )
        try:
            return func(self, *args, **kwargs)
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()

    return wrapper
