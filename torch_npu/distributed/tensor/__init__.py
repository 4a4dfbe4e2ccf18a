"""DTensor sharding strategies of the npu operators, registered when this package is imported.

DTensor knows how to shard ATen operators; the fused ``npu_*`` operators (``torch.ops.npu``)
need a strategy each before a DTensor can flow through them. Importing this package
registers one, through DTensor's own ``register_sharding``, for every npu operator of the
table in ``_strategies`` that exists in this process. ``import torch_npu`` does not import
it (DTensor's machinery is heavy); import it, or touch ``torch_npu.distributed.tensor``.
"""
from __future__ import annotations

from torch_npu.distributed.tensor._strategies import STRATEGIES, register_strategies

__all__ = ["STRATEGIES", "registered_ops"]

# Qualified names ("npu_rms_norm.default") of the operators given a strategy here.
registered_ops: tuple[str, ...] = register_strategies()
