"""Makes Inductor treat npu's C++ kernels the way it treats cpu's.

Inductor decides several things from the device *type* rather than from the kernel
backend: the loop rewrites tried during fusion (loop reordering, reindexing a pointwise
node to a reduction's loops, index inversion) are skipped only for ``cpu`` nodes, and while
generating a kernel, ``get_current_backend()`` answers ``"cpp"`` only for ``cpu`` (any
other device gets ``config.cuda_backend``, i.e. Triton's rules for CSE dtypes and more).
npu runs the very C++ kernels of cpu on host memory, so a C++ backend for npu needs both
answers to be the cpu ones:

* ``FusionRules`` turns the three rewrites off from the moment the Scheduler creates the
  npu backend (before fusion starts) until that backend generates its first kernel (fusion
  is over). They are Triton-only assumptions (they read SIMD loop groups), so cpu nodes in
  the same graph are unaffected: Inductor skips them for cpu anyway.
* ``as_host_kernel()`` makes ``cpu`` the current device while one kernel's code is
  generated. Kernel *calls* are emitted outside it, on npu, so they go through the
  runtime's launch entry point.

Both use Inductor's own switches (``config.patch``, ``V.graph.set_current_device``) and
replace nothing.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch._inductor import config as inductor_config
from torch._inductor.virtualized import V

# Inductor applies these only to non-cpu nodes; they assume Triton's loop groups.
FUSION_CONFIG: dict[str, Any] = {
    "loop_ordering_after_fusion": False,
    "loop_reindexing_after_fusion": False,
    "loop_index_inversion_in_fusion": False,
}

HOST_DEVICE = torch.device("cpu")

# The patch of the Scheduler being built in this thread (one at a time: fusion of a graph
# is over before any subgraph scheduler starts).
_active = threading.local()


class FusionRules:
    """Holds ``FUSION_CONFIG`` in force for one Scheduler's fusion phase."""

    def __init__(self) -> None:
        self._patch: Any = None

    def begin(self) -> None:
        # A patch left open by a compile that failed during fusion is closed first, so
        # a failure never leaks these settings past the next npu compile of this thread.
        stale = getattr(_active, "rules", None)
        if stale is not None:
            stale.end()
        self._patch = inductor_config.patch(FUSION_CONFIG)
        self._patch.__enter__()
        _active.rules = self

    def end(self) -> None:
        if self._patch is None:
            return
        patch, self._patch = self._patch, None
        if getattr(_active, "rules", None) is self:
            _active.rules = None
        patch.__exit__(None, None, None)


@contextlib.contextmanager
def as_host_kernel() -> Iterator[None]:
    """Generate the kernel code inside as if the current device were cpu."""
    with V.graph.set_current_device(HOST_DEVICE):
        yield
