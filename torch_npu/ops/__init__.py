"""The fused ``npu_*`` operators that Ascend model code calls, as real PyTorch operators.

Code written for Ascend calls ``torch_npu.npu_rms_norm(...)``, ``torch_npu.npu_fusion_attention(...)``
and so on, and exported programs refer to them as ``torch.ops.npu.<name>``. Each op family is one
module of this package: it registers its operators in the ``npu`` namespace through an
``OpFamily`` (``_op_family``): the npu kernel, a fake kernel (so ``torch.compile`` and
``torch.export`` trace it) and autograd where Ascend has a backward. A family's ``__all__`` names
the callables it exports as ``torch_npu.<name>``.

Families are imported on first use, not at ``import torch_npu`` (importing and registering all of
them cost about as much again as the rest of the import). PyTorch resolves
``torch.ops.npu.<name>`` in the dispatcher, with no Python hook on the lookup, so the runtime
library defines every family's schemas when it loads (``torch_npu/csrc/aten/op_stand_ins.cpp``,
from ``_catalog``, which is generated from the families, and its C++ include
``npu_op_schemas.inc``, both checked by test/ops/test_op_catalog.py) with a C++ stand-in kernel
per operator at Autograd and CompositeExplicitAutograd: the stand-in takes the GIL, imports
the operator's family (``load``), which drops the family's stand-ins
(``torch_npu._C._npu_drop_op_stand_ins``) before registering its own kernels, and calls the
operator again with the same arguments. So an operator found any way (``torch.ops.npu``, an
exported program loaded in a fresh process, Dynamo, FakeTensorMode, opcheck) runs its family's
kernels from its first call, in inference mode and under autograd. An error raised by the
family's import is raised by that call with its message. ``torch_npu.<name>`` imports the
family at lookup (``family_of``; ``install`` maps the names at ``import torch_npu``). Code that
asks the dispatcher about an operator's kernels loads its family first (``load``) or all of
them (``register_all``).

A family may also define ``INDUCTOR_DECOMPOSITIONS`` (``{"name.overload": ATen composite}``):
the formula Inductor decomposes the operator into so that it fuses with its neighbours.
``register_inductor_decompositions()`` hands them to Inductor; the compile trigger calls it
when an Inductor compile is about to start, never at ``import torch_npu``.
"""
from __future__ import annotations

import importlib
import threading
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


_LOCK = threading.RLock()
_LOADED: set[str] = set()
_EXPORT_FAMILY: dict[str, str] = {}


def install() -> None:
    """Map every exported ``torch_npu.<name>`` to its family (``import torch_npu``). Idempotent.

    The schemas and their stand-in kernels are defined by the runtime library when it loads
    (``torch_npu/csrc/aten/op_stand_ins.cpp``, from ``_catalog.SCHEMAS``)."""
    if _EXPORT_FAMILY:
        return
    from . import _catalog

    for family in FAMILIES:
        for name in _catalog.EXPORTS.get(family, ()):
            _EXPORT_FAMILY[name] = family


def load(family: str):
    """Import ``family`` (registering its operators in place of the stand-ins); return it."""
    if family in _LOADED:
        return importlib.import_module(f"{__name__}.{family}")
    with _LOCK:
        # The family's OpFamily destroys its stand-ins before registering.
        module = importlib.import_module(f"{__name__}.{family}")
        _LOADED.add(family)
    return module


def family_of(name: str) -> str | None:
    """The family that exports ``torch_npu.<name>``, or None."""
    return _EXPORT_FAMILY.get(name)


def exported_names() -> tuple[str, ...]:
    """Every ``torch_npu.<name>`` the families export."""
    return tuple(_EXPORT_FAMILY)


def register_all() -> dict[str, Any]:
    """Import every family (which registers its operators); return ``{public name: callable}``."""
    exported: dict[str, Any] = {}
    for family in FAMILIES:
        module = load(family)
        for name in module.__all__:
            exported[name] = getattr(module, name)
    return exported


def build_catalog() -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """``(schemas, exports)`` by family, read from the imported families: what ``_catalog``
    must hold (``python -m torch_npu.ops`` writes it)."""
    schemas: dict[str, tuple[str, ...]] = {}
    exports: dict[str, tuple[str, ...]] = {}
    for family in FAMILIES:
        module = load(family)
        recorded = getattr(getattr(module, "_family", None), "schemas", [])
        if recorded:
            schemas[family] = tuple(recorded)
        exports[family] = tuple(module.__all__)
    return schemas, exports


def render_catalog() -> str:
    schemas, exports = build_catalog()
    lines = [
        '"""Every op family\'s schemas and exported names, so that ``import torch_npu`` defines the',
        "operators without importing the families (see ``torch_npu.ops``). Generated by",
        '``python -m torch_npu.ops``; test/ops/test_op_catalog.py checks it against the families."""',
        "",
        "SCHEMAS = {",
    ]
    for family, items in schemas.items():
        lines.append(f"    {family!r}: (")
        lines.extend(f"        {schema!r}," for schema in items)
        lines.append("    ),")
    lines += ["}", "", "EXPORTS = {"]
    for family, names in exports.items():
        lines.append(f"    {family!r}: {names!r},")
    lines += ["}", ""]
    return "\n".join(lines)


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
        module = load(family)
        for name, composite in getattr(module, "INDUCTOR_DECOMPOSITIONS", {}).items():
            op = overload(name)
            if op not in decomposition.decompositions:
                decomposition.register_decomposition(op)(composite)
                added.append(name)
    if added:
        decomposition.fast_random_decomps.cache_clear()
    return added
