"""``torch_npu.npu.npugraph_ex``: Ascend's in-package entry to the npugraph_ex compiler.

Ascend code reaches npugraph_ex through ``torch_npu.npu.npugraph_ex`` as well as the
standalone ``npugraph_ex`` package (here at ``torch_npu/dynamo/npugraph_ex``). This
package is that entry: ``compile_fx(gm, example_inputs, options)`` compiles one FX graph
with an options dict (the ``CompilerConfig`` fields), ``register_replacement`` adds an
FX pattern rewrite applied before capture (``patterns``), ``scope`` has the context
managers that set core limits and determinism for a region, and ``inference`` the
compile-and-cache entry of inference scripts. Nothing here is imported by
``import torch_npu``; ``register_replacement`` loads Inductor's pattern matcher on first
access.
"""
from __future__ import annotations

import importlib
from typing import Any

from . import inference, scope

__all__ = ["compile_fx", "register_replacement", "inference", "scope"]


def _config_from_options(options: Any):
    from npugraph_ex.configs import CompilerConfig

    config = CompilerConfig()
    if options is None:
        return config
    if not isinstance(options, dict):
        raise TypeError(f"npugraph_ex options must be a dict, got {type(options).__name__}")
    known = sorted(vars(config))
    for key, value in options.items():
        if key not in known:
            raise ValueError(f"unknown npugraph_ex option {key!r}; the options are {', '.join(known)}")
        if not isinstance(value, bool):
            raise TypeError(f"npugraph_ex option {key!r} must be a bool, got {value!r}")
        setattr(config, key, value)
    return config


def _example_inputs_of(gm) -> list:
    values = [node.meta.get("val") for node in gm.graph.nodes if node.op == "placeholder"]
    if any(v is None for v in values):
        raise ValueError("compile_fx: example_inputs not given and the graph's placeholders carry no 'val' "
                         "metadata to make them from; pass example_inputs")
    return values


def compile_fx(gm, example_inputs=None, options=None):
    """Compile the FX graph ``gm`` into an npu callable (boxed: it takes the list of inputs).

    ``options`` sets ``CompilerConfig`` fields (``{"optimize_fx": False}``); the patterns
    of ``register_replacement`` are applied first. Without ``example_inputs`` they are
    taken from the placeholders' ``val`` metadata (graphs traced by Dynamo/AOT have it).
    """
    import npugraph_ex

    config = _config_from_options(options)
    if example_inputs is None:
        example_inputs = _example_inputs_of(gm)
    patterns = importlib.import_module(f"{__name__}.patterns") if _patterns_loaded() else None
    if patterns is not None:
        gm = patterns.apply_registered_patterns(gm)
    return npugraph_ex.compile_fx(gm, list(example_inputs), config)


def _patterns_loaded() -> bool:
    import sys

    return f"{__name__}.patterns" in sys.modules


def __getattr__(name: str) -> Any:
    if name in ("register_replacement", "patterns"):
        patterns = importlib.import_module(f"{__name__}.patterns")
        return patterns if name == "patterns" else patterns.register_replacement
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
