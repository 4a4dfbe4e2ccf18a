"""What ``torch.compile(mode="reduce-overhead")`` does on npu tensors: warn, once.

The mode asks Inductor for CUDA graph trees, which are CUDA-only: on npu, Inductor drops
them (logging only under the ``cudagraphs`` artifact), so the program runs without any
graph capture and nobody is told. Routing Inductor's output through NPU graph trees would
mean replacing Inductor's cudagraph wrapping, which no extension point allows; so the
user is told, once per process, and pointed at ``backend="npugraphs"``.

``ReduceOverheadNotice`` is an Inductor custom pass for the npu device (registered with
``register_backend_for_device(..., device_custom_pass=...)``): it runs for every npu
graph Inductor compiles, changes nothing, and emits the warning when the compile has the
mode's ``triton.cudagraphs`` setting on.
"""
from __future__ import annotations

import warnings

import torch
from torch._inductor.custom_graph_pass import CustomGraphModulePass

MESSAGE = (
    "torch.compile(mode='reduce-overhead') runs without graph capture on npu tensors: "
    "Inductor's CUDA graph trees are CUDA-only. For NPU graphs use "
    "torch.compile(model, backend='npugraphs') (with torch_npu.npu.mark_step_begin() "
    "in training loops)."
)

_warned = False
log = torch._logging.getArtifactLogger(__name__, "npu_graphs")


def warn_once_if_reduce_overhead() -> bool:
    """Warn (once per process) if the Inductor compile under way asked for cudagraphs."""
    global _warned
    from torch._inductor import config

    if not config.triton.cudagraphs:
        return False
    log.debug("mode='reduce-overhead': this npu graph runs without NPU graphs (use backend='npugraphs')")
    if _warned:
        return False
    _warned = True
    warnings.warn(MESSAGE, UserWarning, stacklevel=2)
    return True


class ReduceOverheadNotice(CustomGraphModulePass):
    """A no-op npu custom pass whose only effect is ``warn_once_if_reduce_overhead``."""

    def __call__(self, gm: torch.fx.GraphModule) -> None:
        warn_once_if_reduce_overhead()

    def uuid(self) -> str:
        # Constant: the pass never changes the graph, so it must not split the cache.
        return "torch_npu.reduce_overhead_notice.v1"
