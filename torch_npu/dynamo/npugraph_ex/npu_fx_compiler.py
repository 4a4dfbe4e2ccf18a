"""The npugraph_ex compiler: FX clean-ups, then the graph made into an NPU graph callable.

``get_npu_backend`` returns a ``torch.compile`` backend: AOT autograd whose forward and
backward ATen graphs go through ``compile_fx``. ``compile_fx`` looks ``_optimize_fx`` up
in this module's globals at every call, so replacing ``npu_fx_compiler._optimize_fx``
(as test suites do in ``setUp``) takes effect for the next compile. ``_capture_npu_graph``
is where the optimized graph becomes the callable that runs it, through NPU graph
capture and replay with static inputs.

Heavy imports (Dynamo, AOT autograd) happen inside the functions, so importing the package
stays cheap.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from npugraph_ex.configs import CompilerConfig

__all__ = ["CompilerConfig", "compile_fx", "get_compiler", "get_npu_backend"]


def _optimize_fx(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """FX-level clean-ups before capture: drop nodes whose results are never used."""
    if gm.graph.eliminate_dead_code():
        gm.recompile()
    return gm


def _capture_npu_graph(
    gm: torch.fx.GraphModule, example_inputs: list[Any], config: CompilerConfig
) -> Callable[[list[Any]], Any]:
    """The callable (boxed: takes the list of inputs) that runs the optimized graph.

    NPU-graph capture and replay live in ``npugraph_ex._capture``, built on torch_npu's
    graph trees, which ships with this module.
    """
    from npugraph_ex._capture import capture_npu_graph

    return capture_npu_graph(gm, example_inputs, config)


def compile_fx(
    gm: torch.fx.GraphModule, example_inputs: list[Any], config: CompilerConfig | None = None
) -> Callable[[list[Any]], Any]:
    """Compile one ATen graph: ``_optimize_fx`` (if enabled), then ``_capture_npu_graph``."""
    config = config if config is not None else CompilerConfig()
    if config.optimize_fx:
        gm = _optimize_fx(gm)
    return _capture_npu_graph(gm, example_inputs, config)


def get_compiler(compiler_config: CompilerConfig | None = None) -> Callable[..., Any]:
    """An AOT-autograd compiler (``gm, example_inputs -> boxed callable``) for ``compiler_config``."""

    def npugraph_ex_compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        return compile_fx(gm, example_inputs, compiler_config)

    return npugraph_ex_compiler


def get_npu_backend(compiler_config: CompilerConfig | None = None) -> Callable[..., Any]:
    """A ``torch.compile`` backend: AOT autograd with ``get_compiler`` for both directions."""
    from torch._dynamo.backends.common import aot_autograd

    compiler = get_compiler(compiler_config)
    return aot_autograd(
        fw_compiler=compiler, bw_compiler=compiler, keep_inference_input_mutations=True
    )


def reset() -> None:
    """Free the NPU graphs captured so far (nothing to do if none was)."""
    import sys

    capture = sys.modules.get("npugraph_ex._capture")
    if capture is not None:
        capture.reset()
