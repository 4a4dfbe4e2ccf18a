"""torch_npu.jit: TorchScript graph rewrites that put npu fused operators into scripted models.

``torch_npu.jit.optimize(scripted)`` applies every registered fusion pass (see
``register_fusion_pattern``) to the module's graphs in place. Loaded only when imported.
"""
from torch_npu.jit.register_fusion_pattern import optimize

__all__ = ["optimize"]
