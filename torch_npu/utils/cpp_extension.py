"""NpuExtension: a setuptools Extension for C++ code that builds against torch and torch_npu.

Ascend code builds its custom operators with ``NpuExtension(name, sources)``; it is
``torch.utils.cpp_extension.CppExtension`` plus the include directories that make
``#include "torch_npu/csrc/..."`` resolve against the installed torch_npu package.
"""
from __future__ import annotations

import os

__all__ = ["NpuExtension", "include_paths"]


def include_paths():
    """Directories with torch_npu's headers: the package's parent (for ``torch_npu/csrc/...``)
    and ``torch_npu/include`` when the package ships one."""
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [os.path.dirname(package_dir)]
    shipped = os.path.join(package_dir, "include")
    if os.path.isdir(shipped):
        paths.append(shipped)
    return paths


def NpuExtension(name, sources, *args, **kwargs):
    """A ``CppExtension`` (C++17, torch's headers and libraries) that also sees torch_npu's headers."""
    from torch.utils.cpp_extension import CppExtension

    if not isinstance(name, str) or not name:
        raise ValueError(f"NpuExtension: name must be a non-empty module name, got {name!r}")
    if isinstance(sources, str) or not all(isinstance(s, str) for s in sources):
        raise TypeError("NpuExtension: sources must be a list of source file paths")
    include_dirs = list(kwargs.get("include_dirs", []))
    for path in include_paths():
        if path not in include_dirs:
            include_dirs.append(path)
    kwargs["include_dirs"] = include_dirs
    kwargs["language"] = "c++"
    return CppExtension(name, list(sources), *args, **kwargs)
