"""Access to torch-mlir's MLIR Python bindings, with one clear error when they are absent.

The `mlir` codegen backend needs the MLIR IR parser, the pass manager and the
ExecutionEngine. They ship in the optional `torch-mlir` wheel; this module is the only
place that imports them, so a missing dependency is reported once, with the fix.
"""

INSTALL_HINT = (
    "npu_backend='mlir' needs the MLIR Python bindings shipped by torch-mlir. Install them "
    "without letting pip touch torch: `pip install --no-deps torch-mlir==20261001` "
    "or install torch_npu with the `mlir` extra."
)

try:
    from torch_mlir import ir, passmanager  # noqa: F401
    from torch_mlir.execution_engine import ExecutionEngine  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(f"{INSTALL_HINT} (import failed: {exc})") from exc
