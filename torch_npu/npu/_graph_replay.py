"""The runtime's replay helpers for graphs recorded from compiled code, on the device module.

NPU graph trees (``torch_npu.compiler.graph_trees``) pick a recording by its inputs'
signature, keep static inputs in place through storage aliases, and replay a recording's
kernels from a plan built once. These are runtime services, and the compile layer reaches
the runtime only through the device module (``torch.npu``): this module hands the runtime's
functions over as they are, with no Python frame in between (they run on every compiled
call).
"""
from __future__ import annotations

import torch_npu._C as _C

# The key a call's recordings are found by: each input's sizes, strides, dtype and device
# (or its value, for an int, float, bool or None); None for an input of another kind.
graph_input_signature = _C._graph_input_signature
# torch.npu.is_current_stream_capturing without its Python frame.
is_current_stream_capturing = _C._is_current_stream_capturing
# Static outputs are handed out over a storage of their own that shares the graph's memory,
# so one handed-out tensor can be invalidated alone: make such an alias, or ask if a
# tensor's storage is one.
is_storage_alias = _C._is_storage_alias
alias_storage = _C._alias_storage
# The kernels of a recording with their argument slots, replayed in one C++ call.
ReplayPlan = _C._ReplayPlan

__all__ = ["graph_input_signature", "is_current_stream_capturing", "is_storage_alias", "alias_storage", "ReplayPlan"]
