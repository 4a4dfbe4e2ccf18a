"""The ``default`` npu backend: Inductor's C++ kernels, run on npu (host) memory.

npu tensors live in host memory, so the kernels Inductor generates for cpu are correct
for them as they are; only the wrapper differs (see ``wrapper_codegen``: npu kernel calls
go through the runtime's launch entry point). A class of its own keeps the backend
identifiable (logs, tests, plugins deriving from it).
"""
from __future__ import annotations

from torch._inductor.codegen.cpp import CppScheduling


class NpuCppScheduling(CppScheduling):
    """C++/OpenMP kernels for npu tensors."""
