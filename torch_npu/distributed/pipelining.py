"""torch_npu.distributed.pipelining: ``pipeline`` as Ascend names it.

Splitting a model into pipeline stages is torch's ``torch.distributed.pipelining.pipeline``
(an FX trace split at ``split_spec``), device-independent. Ascend's signature adds
``mode`` and ``atomic_units`` for its own tracing front end, which has no counterpart here:
only their defaults are accepted, and other values are a RuntimeError saying so.
"""
from __future__ import annotations

from typing import Any, Optional

__all__ = ["pipeline"]


def pipeline(module: "torch.nn.Module", mb_args: "tuple[Any, ...]", mb_kwargs: "Optional[dict[str, Any]]" = None,
             split_spec=None, split_policy=None, mode: "Optional[str]" = None,
             atomic_units: "Optional[list[str]]" = None):
    """torch's ``pipeline(module, mb_args, mb_kwargs, split_spec, split_policy)``."""
    if mode is not None or atomic_units is not None:
        raise RuntimeError("torch_npu.distributed.pipelining.pipeline: mode and atomic_units select Ascend's own "
                           "graph-capture front end, which the simulated NPU does not have; leave them None "
                           "(torch's FX tracing is used)")
    from torch.distributed.pipelining import pipeline as torch_pipeline

    return torch_pipeline(module, mb_args, mb_kwargs=mb_kwargs, split_spec=split_spec, split_policy=split_policy)
