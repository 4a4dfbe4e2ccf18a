"""``torch_npu.dynamo``: home of the bundled ``npugraph_ex`` package's files.

``torch_npu.dynamo.npugraph_ex`` is the canonical top-level ``npugraph_ex`` module itself
(see ``torch_npu._startup.npugraph_ex_finder``); the attribute is resolved on first access so that
nothing is imported until asked.
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    if name == "npugraph_ex":
        # The alias finder binds the canonical module here as the import's side effect.
        return importlib.import_module(f"{__name__}.npugraph_ex")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
