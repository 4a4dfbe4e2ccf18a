"""Building C++ extensions against torch_npu: ``NpuExtension``, ``include_paths``, ``library_paths``.

Ascend code builds its custom operators with ``NpuExtension(name, sources)``: it is
``torch.utils.cpp_extension.CppExtension`` plus torch_npu's public headers
(``torch_npu/include``, so ``#include "torch_npu/csrc/core/npu/NPUStream.h"`` resolves)
and its runtime library (``-ltorch_npu`` from ``torch_npu/lib``, with that directory as the
extension's run-time search path). ``include_paths()`` and ``library_paths()`` give the same
directories to ``torch.utils.cpp_extension.load``/``load_inline`` or another build system.
"""
from __future__ import annotations

import os

__all__ = ["NpuExtension", "include_paths", "library_paths"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def include_paths():
    """Directories with torch_npu's public C++ headers: ``torch_npu/include`` and the
    ACL headers below it (``#include "acl/acl_base.h"``)."""
    include = os.path.join(_PACKAGE_DIR, "include")
    return [include, os.path.join(include, "third_party", "acl", "inc")]


def library_paths():
    """The directory of ``libtorch_npu.so``, the npu runtime extensions link with ``-ltorch_npu``."""
    library_dir = os.path.join(_PACKAGE_DIR, "lib")
    if not os.path.isfile(os.path.join(library_dir, "libtorch_npu.so")):
        raise RuntimeError(
            f"torch_npu's runtime library is missing from {library_dir}: build the package first "
            "(`pip install --no-build-isolation -e .` or `python setup.py build_ext --inplace`)"
        )
    return [library_dir]


def _merged(given, extra):
    merged = list(given or [])
    for item in extra:
        if item not in merged:
            merged.append(item)
    return merged


def NpuExtension(name, sources, *args, **kwargs):
    """A ``CppExtension`` (torch's headers and libraries) that also sees torch_npu's headers
    and links its runtime (``libtorch_npu.so``, found at run time through the extension's rpath)."""
    from torch.utils.cpp_extension import CppExtension

    if not isinstance(name, str) or not name:
        raise ValueError(f"NpuExtension: name must be a non-empty module name, got {name!r}")
    if isinstance(sources, str) or not all(isinstance(s, str) for s in sources):
        raise TypeError("NpuExtension: sources must be a list of source file paths")
    libraries = library_paths()
    kwargs["include_dirs"] = _merged(kwargs.get("include_dirs"), include_paths())
    kwargs["library_dirs"] = _merged(kwargs.get("library_dirs"), libraries)
    kwargs["runtime_library_dirs"] = _merged(kwargs.get("runtime_library_dirs"), libraries)
    kwargs["libraries"] = _merged(kwargs.get("libraries"), ["torch_npu"])
    kwargs["language"] = "c++"
    return CppExtension(name, list(sources), *args, **kwargs)
