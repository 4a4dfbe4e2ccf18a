"""Asks the other ``sys.meta_path`` finders for a module's spec.

torch_npu's finders (the compile trigger and the ``npugraph_ex`` alias) never locate
modules themselves where another finder can: they delegate, so a custom importer
installed by the user or a tool still does the finding.
"""
from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec


def find_spec_elsewhere(asking_finder: object, fullname: str, path, target=None) -> ModuleSpec | None:  # noqa: ANN001
    """The first spec any finder on ``sys.meta_path`` other than ``asking_finder`` gives."""
    for finder in list(sys.meta_path):
        if finder is asking_finder:
            continue
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        spec = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None
