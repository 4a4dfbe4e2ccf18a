"""Installs the npu ``CUDAGraphPolicy`` as the default of ``torch._inductor.config.cudagraph_policy``.

The extension point exists: ``torch._inductor.config.cudagraph_policy`` is the slot through
which another graph implementation takes over Inductor's cudagraph wrapping (see
``torch_npu.compiler.inductor.reduce_overhead``). What is missing is a way to fill it
for the whole process: an assignment to a torch config value is stored per thread (a
context variable), and Inductor compiles the backward of a training graph lazily, on
autograd's device thread, where a policy assigned on the main thread is not seen. So the
entry's default is set, which every thread reads when it has not assigned a value itself.
Whatever policy was the default before is kept and handles every graph that is not on npu
(for a graph of another device, a policy being set makes Inductor take its single-graph
cudagraph path instead of the per-partition one; on a CPU build of torch there is none).

A user's own assignment (``config.cudagraph_policy = mine``, or ``config.patch``) takes
precedence in their thread, as for any config value. Delete this patch once PyTorch can
register a cudagraph policy per device type.
"""
from __future__ import annotations

OPTION = "cudagraph_policy"


def apply() -> None:
    """Make the npu policy the entry's default once, wrapping the previous default."""
    from torch._inductor import config

    from torch_npu.compiler.inductor.reduce_overhead import NpuGraphPolicy

    entry = config._config[OPTION]
    if isinstance(entry.default, NpuGraphPolicy):
        return
    entry.default = NpuGraphPolicy(previous=entry.default)
    # Cached views of the config in this thread must see the new default.
    config._hash_dirty_var.set(True)
    config._mark_get_dict_dirty(OPTION)
