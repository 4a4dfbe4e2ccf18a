"""The `mlir` Inductor codegen backend for npu (selected with npu_backend="mlir").

Fused Inductor kernels are emitted as MLIR (arith/math/scf/memref), lowered to LLVM
with the MLIR pass pipeline and run on the tensors' own memory. Importing this package
requires torch-mlir's MLIR bindings and raises ImportError with install instructions
when they are missing; the default backend never imports it.
"""

from . import _bindings  # noqa: F401  (fails early with the install hint)
from .fallback import fallback_stats, reset_fallback_stats

__all__ = ["fallback_stats", "reset_fallback_stats", "MlirScheduling"]


def __getattr__(name):
    # The scheduling class pulls in Inductor's C++ codegen; load it only when asked.
    if name == "MlirScheduling":
        from .scheduling import MlirScheduling

        return MlirScheduling
    raise AttributeError(name)
