"""``backend="npugraph_ex"``: hands the graph to the ``npugraph_ex`` package.

The package is imported by its canonical top-level name, so an independently installed
``npugraph_ex`` distribution is used when present and the bundled copy otherwise (see
``torch_npu._startup.npugraph_ex_finder``). ``options=`` become the fields of its ``CompilerConfig``.
"""
from __future__ import annotations

from typing import Any

import torch


def npugraph_ex(gm: torch.fx.GraphModule, example_inputs: list[Any], options: dict | None = None):  # noqa: ANN201
    import npugraph_ex as package

    config = package.CompilerConfig()
    for key, value in (options or {}).items():
        if not hasattr(config, key):
            raise ValueError(
                f"unknown option {key!r} for backend='npugraph_ex'; "
                f"CompilerConfig has {sorted(vars(config))}"
            )
        setattr(config, key, value)
    return package.get_npu_backend(compiler_config=config)(gm, example_inputs)


def reset() -> None:
    import sys

    package = sys.modules.get("npugraph_ex")
    compiler = getattr(package, "npu_fx_compiler", None)
    if compiler is not None and hasattr(compiler, "reset"):
        compiler.reset()
