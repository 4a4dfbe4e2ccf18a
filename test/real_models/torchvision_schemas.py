"""Makes torchvision's pure-Python model code importable over the CPU build of torch.

The torchvision 0.28.0 wheel on the package index is a CUDA build: its C++ operators do
not load against torch 2.13's CPU build, so the ``torchvision::`` schemas are missing, and
``import torchvision`` stops where it registers fake kernels for ``torchvision::nms`` and
``torchvision::qnms`` ("operator torchvision::nms does not exist"). Defining those two
schemas first (no kernel: calling them still fails, as it would without the C++ ops) lets
the import finish; the models (resnet, mobilenet) never use them. transformers imports
torchvision when it is installed, so this must run before transformers is imported too.
"""
from __future__ import annotations

import torch

# Kept alive for the whole process: dropping the Library object would remove the schemas.
_library: torch.library.Library | None = None

SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)


def _schema_exists(name: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(name, "")
    except RuntimeError:
        return False
    return True


def define_torchvision_schemas() -> None:
    """Define the schemas torchvision's import needs, unless its C++ ops provide them."""
    global _library
    if _library is not None or _schema_exists("torchvision::nms"):
        return
    _library = torch.library.Library("torchvision", "FRAGMENT")
    for schema in SCHEMAS:
        _library.define(schema)
