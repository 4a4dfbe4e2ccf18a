"""The fused ``npu_*`` operators that Ascend model code calls, as real PyTorch operators.

Code written for Ascend calls ``torch_npu.npu_rms_norm(...)``, ``torch_npu.npu_fusion_attention(...)``
and so on, and exported programs refer to them as ``torch.ops.npu.<name>``. Each op family is one
module of this package: it defines its operators in the ``npu`` namespace with the Ascend schemas
(through its own ``torch.library.Library("npu", "FRAGMENT")``, kept alive by the module) and
registers the npu kernel, a fake kernel (so ``torch.compile`` and ``torch.export`` trace it) and
autograd where Ascend has a backward. A family's ``__all__`` names the callables it exports as
``torch_npu.<name>``.

``import torch_npu`` registers every family: schemas and registrations cost little, and a family
keeps heavy kernel code out of its import (it is imported on first call).

A family may also define ``INDUCTOR_DECOMPOSITIONS`` (``{"name.overload": ATen composite}``):
the formula Inductor decomposes the operator into so that it fuses with its neighbours.
``register_inductor_decompositions()`` hands them to Inductor; the compile trigger calls it
when an Inductor compile is about to start, never at ``import torch_npu``.
"""
from __future__ import annotations

import importlib
from typing import Any

# Op family modules under torch_npu.ops, in registration order.
FAMILIES: tuple[str, ...] = (
    "fusion_attention",
    "inference_attention",
    "format_cast",
    "storage_ops",
    "norms",
    "rotary",
    "activations",
    "softmax",
    "confusion_transpose",
    "dtype_cast",
    "moe",
    "grouped_matmul",
    "quantization",
    "gelu_variants",
    "box_overlaps",
    "box_coding",
    "nms",
    "quantize",
    "weight_dequant",
    "tensor_slicing",
    "sign_bits",
    "index_ops",
    "reductions",
    "moe_finalize",
    "group_norm",
    "matmul_variants",
    "stream_memory",
    "softmax_fusions",
    "convolution",
    "roi_pooling",
    "rotated_boxes",
    "box_assign",
    "attention_score",
    "matmul_all_reduce",
    "recurrent_attention",
    "hifloat8",
)


def register_all() -> dict[str, Any]:
    """Import every family (which registers its operators); return ``{public name: callable}``."""
    exported: dict[str, Any] = {}
    for family in FAMILIES:
        module = importlib.import_module(f"{__name__}.{family}")
        for name in module.__all__:
            exported[name] = getattr(module, name)
    return exported


def register_inductor_decompositions() -> list[str]:
    """Add every family's decompositions to Inductor's table; return the ops added.

    Inductor copies its table into a cache on first use (``fast_random_decomps``); the
    cache is cleared so that a compile that ran before this call does not hide the new
    entries. Idempotent.
    """
    from torch._inductor import decomposition

    from ._op_family import overload

    added: list[str] = []
    for family in FAMILIES:
        module = importlib.import_module(f"{__name__}.{family}")
        for name, composite in getattr(module, "INDUCTOR_DECOMPOSITIONS", {}).items():
            op = overload(name)
            if op not in decomposition.decompositions:
                decomposition.register_decomposition(op)(composite)
                added.append(name)
    if added:
        decomposition.fast_random_decomps.cache_clear()
    return added
