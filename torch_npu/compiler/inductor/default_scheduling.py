"""The ``default`` npu backend: Inductor's C++ kernels, run on npu (host) memory.

npu tensors live in host memory, so the kernels Inductor generates for cpu are correct
for them as they are. Two things differ from cpu: Inductor must schedule and generate them
by cpu's rules although the device is npu (see ``host_kernel_rules``), and their calls go
through the runtime's launch entry point (see ``wrapper_codegen``).
"""
from __future__ import annotations

from typing import Any

from torch._inductor.codegen.cpp import CppScheduling

from . import outer_loop_rules
from .host_kernel_rules import FusionRules, as_host_kernel


class NpuCppScheduling(CppScheduling):
    """C++/OpenMP kernels for npu tensors."""

    # C++ code generation needs every member of an outer-loop group to step its outer loop
    # alike (see ``outer_loop_rules``); a backend without that constraint turns this off.
    outer_loop_needs_equal_steps = True

    def __init__(self, scheduler: Any) -> None:
        super().__init__(scheduler)
        self._fusion_rules = FusionRules()
        if scheduler is not None:
            # Created while the Scheduler builds its nodes, i.e. before fusion.
            self._fusion_rules.begin()

    def can_fuse_vertical(self, node1: Any, node2: Any) -> bool:
        # A row-only node in an outer-loop group makes the whole group fall back to one
        # loop nest per node (see ``outer_loop_rules``): keep it out, keep the rest fused.
        if (
            self.outer_loop_needs_equal_steps
            and self.can_fuse_vertical_outer_loop(node1, node2)
            and outer_loop_rules.breaks_outer_loop(
                node1, node2, self._get_outer_loop_fusion_depth(node1, node2)
            )
        ):
            return False
        return super().can_fuse_vertical(node1, node2)

    def codegen_node(self, node: Any) -> None:
        self._fusion_rules.end()
        with as_host_kernel():
            super().codegen_node(node)

    def codegen_template(self, *args: Any, **kwargs: Any) -> Any:
        self._fusion_rules.end()
        with as_host_kernel():
            return super().codegen_template(*args, **kwargs)

    def flush(self) -> None:
        # Kernel source is finalized here under cpu rules; the call it emits is made by
        # the wrapper for the current device, which is npu again by then.
        self._fusion_rules.end()
        super().flush()
