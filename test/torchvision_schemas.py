"""Defines the two torchvision operator schemas its Python code needs at import.

The torchvision wheel on the package index is a CUDA build whose C++ operators do not load
against the CPU torch; at import it registers fake kernels for torchvision::nms and
torchvision::qnms, which fails unless the schemas exist. transformers imports torchvision, so
every test that imports either calls ``define()`` first. It loads torchvision's C++ library
as torchvision would and defines nothing when that works (a torchvision built for the
installed torch, e.g. torch 2.14.1 with torchvision 0.29.1). The schemas have no kernel: calling them fails as it would without
the C++ ops; the models (resnet, mobilenet) never call them.
"""
import torch

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_LIB = None


def _load_torchvision_library() -> bool:
    """Load torchvision's C++ operators as its import would; False when they do not load.

    Where they load (a torchvision built for the installed torch), defining the schemas
    first would make its own registration of the namespace abort the process.
    """
    import glob
    import importlib.util
    import os

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return False
    libraries = glob.glob(os.path.join(spec.submodule_search_locations[0], "_C*.so"))
    if not libraries:
        return False
    try:
        torch.ops.load_library(libraries[0])
    except OSError:
        return False
    return True


def define() -> None:
    global _LIB
    if _load_torchvision_library():
        return
    missing = [s for name, s in _SCHEMAS.items() if not torch._C._dispatch_has_kernel(f"torchvision::{name}")
               and not hasattr(torch.ops.torchvision, name)]
    if not missing:
        return
    _LIB = torch.library.Library("torchvision", "FRAGMENT")
    for schema in missing:
        _LIB.define(schema)
