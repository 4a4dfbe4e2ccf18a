"""The names ``npu``, ``npugraph_ex`` and ``npugraphs`` and the callables behind them.

Two paths make the names known to Dynamo, and both end at the same function objects:

- the ``torch_dynamo_backends`` entry points of the installed package, which Dynamo lists
  before any compile and loads (``entry_point.load()`` imports this module) on the first
  lookup of a name not registered yet;
- ``register_all()``, run by the compile trigger's ``backends`` step right after Dynamo is
  imported, through ``torch._dynamo.register_backend``.

``register_backend`` raises on a duplicate, so ``register_all`` leaves a name to the
entry-point path when that path got there first; once a name is registered Dynamo never
loads its entry point. Loading this module imports neither Dynamo nor Inductor: each entry imports its
implementation module when it is first called, and first makes sure the setup steps ran,
so a name always resolves to a set-up integration.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable

# Backend name -> module holding the implementation (a function named like the backend).
IMPLEMENTATIONS = {
    "npu": "torch_npu.compiler.backends.npu",
    "npugraph_ex": "torch_npu.compiler.backends.npugraph_ex",
    "npugraphs": "torch_npu.compiler.backends.npugraphs",
}


def _implementation(name: str) -> Callable[..., Any]:
    # The one call from the compiler layer up into the start-up layer, on purpose: a backend
    # can be looked up before Dynamo's import ran the setup steps (torch._dynamo.lookup_backend
    # during Dynamo's own import, an entry point loaded by a tool), and must not run half set up.
    from torch_npu._startup import compile_trigger

    compile_trigger.ensure_setup(f"the first call of backend {name!r}")
    return getattr(importlib.import_module(IMPLEMENTATIONS[name]), name)


def _reset(name: str) -> None:
    # Only a backend that was used has state; never import one to reset it.
    module = sys.modules.get(IMPLEMENTATIONS[name])
    reset = getattr(module, "reset", None)
    if reset is not None:
        reset()


def npu_backend_entry(gm, example_inputs, **kwargs):  # noqa: ANN001, ANN201 - Dynamo backend protocol
    """``backend="npu"``: graph mode on the npu (see ``torch_npu.compiler.backends.npu``)."""
    return _implementation("npu")(gm, example_inputs, **kwargs)


def npugraph_ex_backend_entry(gm, example_inputs, **kwargs):  # noqa: ANN001, ANN201
    """``backend="npugraph_ex"``: the ``npugraph_ex`` package's compiler."""
    return _implementation("npugraph_ex")(gm, example_inputs, **kwargs)


def npugraphs_backend_entry(gm, example_inputs, **kwargs):  # noqa: ANN001, ANN201
    """``backend="npugraphs"``: AOT autograd with NPU graph trees."""
    return _implementation("npugraphs")(gm, example_inputs, **kwargs)


npu_backend_entry.reset = lambda: _reset("npu")  # type: ignore[attr-defined]
npugraph_ex_backend_entry.reset = lambda: _reset("npugraph_ex")  # type: ignore[attr-defined]
npugraphs_backend_entry.reset = lambda: _reset("npugraphs")  # type: ignore[attr-defined]

ENTRIES: dict[str, Callable[..., Any]] = {
    "npu": npu_backend_entry,
    "npugraph_ex": npugraph_ex_backend_entry,
    "npugraphs": npugraphs_backend_entry,
}


def register_all() -> None:
    """Register every entry with Dynamo unless Dynamo has it registered or discoverable.

    ``register_backend`` raises on a duplicate and has no "unless present" form, hence the
    read-only look at Dynamo's tables. A name that Dynamo has discovered as an entry point
    but not loaded is left to Dynamo: this may run *inside* that very load (loading the
    entry imports torch_npu, whose import runs the setup), and Dynamo registers the
    loaded entry right after, which would then be a duplicate. Either way the name ends
    up bound to the same function object.
    """
    from torch._dynamo.backends import registry as dynamo_registry

    for name, entry in ENTRIES.items():
        if name in dynamo_registry._COMPILER_FNS:
            continue
        if dynamo_registry._BACKENDS.get(name) is not None:  # a discovered entry point
            continue
        dynamo_registry.register_backend(compiler_fn=entry, name=name)
