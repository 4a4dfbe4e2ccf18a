"""Defines the two torchvision operator schemas its Python code needs at import.

The torchvision wheel on the package index is a CUDA build whose C++ operators do not load
against the CPU torch; at import it registers fake kernels for torchvision::nms and
torchvision::qnms, which fails unless the schemas exist. transformers imports torchvision, so
the transformers tests define them first (doing nothing when torchvision's own library loaded).
"""
import torch

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_LIB = None


def define() -> None:
    global _LIB
    missing = [s for name, s in _SCHEMAS.items() if not torch._C._dispatch_has_kernel(f"torchvision::{name}")
               and not hasattr(torch.ops.torchvision, name)]
    if not missing:
        return
    _LIB = torch.library.Library("torchvision", "FRAGMENT")
    for schema in missing:
        _LIB.define(schema)
