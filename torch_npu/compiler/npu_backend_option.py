"""The name, environment variable and default of the ``npu_backend`` compile option.

Defined once, here, below both users: ``torch_npu.compiler.inductor.backend_registry``
(which validates and resolves the value) and the patch that adds the entry to
``torch._inductor.config`` (``torch_npu._patches.inductor_npu_backend_option``). It sits
outside ``compiler/inductor/`` so that the patch, applied whenever Inductor's config is
imported, loads nothing of the Inductor layer.
"""
from __future__ import annotations

OPTION = "npu_backend"
ENV_VAR = "TORCHINDUCTOR_NPU_BACKEND"
DEFAULT = "default"
