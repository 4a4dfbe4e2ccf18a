"""``torch.compile(mode="reduce-overhead")`` on npu: Inductor's kernels replayed from NPU graph trees.

The mode turns on ``torch._inductor.config.triton.cudagraphs``. Inductor then wraps every
compiled graph in its CUDA graph trees, which are CUDA-only: for any other device it
records "multiple devices" as the reason not to, and runs the graph without capture.
PyTorch 2.13 offers a slot for another graph implementation,
``torch._inductor.config.cudagraph_policy`` (a ``CUDAGraphPolicy``); ``NpuGraphPolicy``
fills it:

* ``should_wrap(compiled_graph)``: False for graphs on npu (Inductor's own cudagraph
  wrapping must not touch them), otherwise what the policy that was there before says
  (``True`` for the stock behaviour).
* ``wrap_output(output_code)``: called on every ``CompiledFxGraph`` after its
  ``post_compile`` -- on a fresh compile, on an FX-graph-cache hit (both in
  ``_compile_fx_inner``) and on an AOT-autograd-cache hit
  (``FxGraphCacheLoadable.post_compile``). For an npu graph compiled under the mode it
  replaces ``current_callable`` by a ``GraphFunction`` of the NPU graph trees: warm-up,
  record, replay, exactly as ``backend="npugraphs"`` does with eager ATen graphs, but
  recording Inductor's fused kernels. Other graphs go to the previous policy, or are
  returned unchanged.
* ``cudagraphify``: never called for npu graphs (Inductor disabled its own path for them);
  for others it delegates to the previous policy or to Inductor's ``cudagraphify``.

What the trees learn from the compiled graph: forward/backward/inference
(``fx_kwargs``), the parameters and buffers (``static_input_idxs``: borrowed at their
address, never copied), the inputs it mutates (``mutated_input_idxs``: written back when
the graph worked on a copy), and, on a fresh compile, which forward outputs are the
user's (AOT autograd's metadata; the rest are activations for the backward, handed out as
aliases of graph memory). Whether it can be captured at all follows the graph trees' one
set of rules (``graph_trees.graph_facts.capture_blocker``), fed what npu's post-grad pass
read from the graph's node metadata (``capture_facts``: cpu tensors, several devices,
data-dependent sizes, which Inductor itself reports as cpu work) and Inductor's other
reasons (dynamic shapes under ``cudagraph_skip_dynamic_graphs``, an incompatible op); a
graph that cannot runs uncaptured, with one log line.

Installation: the slot is one global value, but a config assignment is per thread (a
context variable), and Inductor compiles a lazy backward on autograd's device thread; so
the policy is installed as the entry's default (``torch_npu._patches.
inductor_cudagraph_policy``), where every thread sees it.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch
from torch._inductor.cudagraph_utils import CUDAGraphPolicy

if TYPE_CHECKING:
    from .capture_facts import CaptureFacts

log = logging.getLogger(__name__)

DEVICE_TYPE = "npu"


def _is_npu_graph(output_code: Any) -> bool:
    return DEVICE_TYPE in getattr(output_code, "device_types", ())


# Inductor's reasons against capture that say what the devices already say (a graph on
# npu is "multiple devices" to it; a cpu tensor, or the host-side size checks of unbacked
# sizes, are a "cpu device").
_DEVICE_REASONS = ("skipping cudagraphs due to multiple devices", "skipping cudagraphs due to cpu device")


def capture_blocker(compiled_graph: Any, facts: CaptureFacts | None) -> str | None:
    """Why Inductor's compiled npu graph cannot run as one NPU graph, or None.

    ``facts`` are what the post-grad pass read from the
    graph's node metadata; without them (a cache hit whose note was not kept) the compiled
    graph's own devices stand in, where cpu work and data-dependent sizes look alike.
    """
    from torch_npu.compiler.graph_trees.graph_facts import capture_blocker as rules

    reason = (compiled_graph.disabled_cudagraphs_reason or "").strip()
    if reason.startswith(_DEVICE_REASONS):
        reason = ""
    if facts is not None:
        devices = set(facts.devices)
        data_dependent = facts.data_dependent_shapes
    else:
        devices = {torch.device(t) for t in compiled_graph.device_types if t != DEVICE_TYPE}
        devices |= {torch.device(DEVICE_TYPE, i) for i in compiled_graph.device_idxs} or {torch.device(DEVICE_TYPE)}
        data_dependent = False
    return rules(devices, data_dependent_shapes=data_dependent, compiler_reason=reason or None)


class NpuGraphPolicy(CUDAGraphPolicy):
    """The ``cudagraph_policy`` that records npu graphs into NPU graph trees; see the module docstring."""

    def __init__(self, previous: CUDAGraphPolicy | None = None):
        self.previous = previous

    def should_wrap(self, compiled_graph: Any) -> bool:
        if _is_npu_graph(compiled_graph):
            return False
        return self.previous.should_wrap(compiled_graph) if self.previous is not None else True

    def cudagraphify(self, model: Any, example_inputs: Any, static_input_idxs: Any, **kwargs: Any) -> Any:
        if self.previous is not None:
            return self.previous.cudagraphify(model, example_inputs, static_input_idxs, **kwargs)
        return super().cudagraphify(model, example_inputs, static_input_idxs, **kwargs)

    def wrap_output(self, output_code: Any) -> Any:
        if not _is_npu_graph(output_code):
            return self.previous.wrap_output(output_code) if self.previous is not None else output_code
        from torch._inductor import config

        if not config.triton.cudagraphs or getattr(output_code, "current_callable", None) is None:
            from torch_npu.compiler.inductor import capture_facts, output_stack_traces

            output_stack_traces.take(None)  # notes taken for this graph are not another's
            capture_facts.take(None)
            return output_code
        output_code.current_callable = _npugraphify(output_code)
        return output_code


def _npugraphify(compiled_graph: Any) -> Any:
    from torch_npu.compiler.graph_trees.tree_manager import CompilationMode, GraphFunction, get_manager
    from torch_npu.compiler.graph_trees.wrap import aot_num_user_outputs

    fx_kwargs = compiled_graph.fx_kwargs
    if fx_kwargs.get("is_backward"):
        mode, static, num_user_outputs = CompilationMode.BACKWARD, set(), None
    else:
        mode = CompilationMode.INFERENCE if fx_kwargs.get("is_inference") else CompilationMode.FORWARD
        static = set(fx_kwargs.get("static_input_idxs") or ())
        num_user_outputs = aot_num_user_outputs() if mode is CompilationMode.FORWARD else None
    from torch_npu.compiler.inductor import capture_facts

    key = getattr(compiled_graph, "_fx_graph_cache_key", None) or ""
    reason = capture_blocker(compiled_graph, capture_facts.take(key))
    device_index = next(iter(compiled_graph.device_idxs), 0) if reason is None else 0
    # Where each output was produced in the user's code, for the overwritten-output error:
    # noted by npu's post-grad pass on a fresh compile and kept by cache key for cache hits
    # (Inductor keeps them only for the graphs it wraps itself, in cudagraph_info).
    from torch_npu.compiler.inductor import output_stack_traces

    output_strides = getattr(compiled_graph, "output_strides", None)
    num_outputs = len(output_strides) if output_strides is not None else None
    stack_traces = output_stack_traces.take(num_outputs)
    if stack_traces is not None:
        output_stack_traces.remember(key, stack_traces)
    else:
        stack_traces = output_stack_traces.recall(key, num_outputs)
    return GraphFunction(
        get_manager(device_index or 0),
        compiled_graph.current_callable,
        mode=mode,
        static_input_idxs=static,
        mutated_input_idxs=set(compiled_graph.mutated_input_idxs),
        num_user_outputs=num_user_outputs,
        name=f"reduce-overhead {key[:12]}".rstrip(),
        disabled_reason=reason,
        stack_traces=list(stack_traces) if stack_traces is not None else None,
    )
