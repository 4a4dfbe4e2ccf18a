"""What each rank of an hccl group is doing: the on-demand form of the timeout report.

A timeout error already carries this report. These functions give the same facts for a
run that is stuck but has not timed out yet: call them from another thread of a stuck
process (a watchdog, a signal handler, a debugger), or set ``TORCH_HCCL_DUMP_AFTER_SEC``
so that a rank waiting longer than that in one collective prints the report by itself.
"""
from __future__ import annotations

from torch_npu.distributed._backend import hccl_backend_of


def collective_status(group=None) -> list[dict]:
    """Per rank of ``group``: pid, liveness, status, last sequence number, and its recent
    collectives (sequence number, op, dtypes and shapes, state, duration)."""
    return hccl_backend_of(group).snapshot()


def collective_report(group=None) -> str:
    """The text the timeout errors print: which ranks have not arrived, and each rank's
    last collectives."""
    backend = hccl_backend_of(group)
    return backend.report("hccl collective status (on demand)")
