"""A test-only npu backend: the default C++ kernels, counting the graphs it schedules.

Registered by tests under a temporary name to check that the backend is chosen per compile
and that a cached artifact of another backend is never served to it.
"""
from torch_npu.compiler.inductor.default_scheduling import NpuCppScheduling

scheduled_graphs = 0


class CountingScheduling(NpuCppScheduling):
    def __init__(self, scheduler):
        global scheduled_graphs
        super().__init__(scheduler)
        if scheduler is not None:  # None: Inductor only asks for backend features
            scheduled_graphs += 1
