"""npugraph_ex: compile FX graphs into NPU graphs for ``torch.compile``.

Written as a standalone distribution: modules import each other by the absolute
``npugraph_ex`` name. ``backend="npugraph_ex"`` in torch_npu uses ``get_npu_backend``.
"""
from npugraph_ex.configs import CompilerConfig
from npugraph_ex.npu_fx_compiler import compile_fx, get_compiler, get_npu_backend

__all__ = ["CompilerConfig", "compile_fx", "get_compiler", "get_npu_backend"]
