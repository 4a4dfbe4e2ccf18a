"""``torch_npu.npu.npu_config``: the module path under which Ascend code sets start-up options.

The options themselves (compile mode, runtime options, AOE, ND matmul format, core
limits) are in ``ascend_options``, the operator data dump calls in ``hardware_only``;
this module gathers them under the path Ascend scripts import them from.
"""
from __future__ import annotations

from .ascend_options import (
    get_device_limit,
    get_mm_bmm_format_nd,
    get_stream_limit,
    is_jit_compile_false,
    reset_stream_limit,
    set_aoe,
    set_compile_mode,
    set_device_limit,
    set_mm_bmm_format_nd,
    set_option,
    set_stream_limit,
)
from .hardware_only import finalize_dump, init_dump, set_dump

__all__ = [
    "get_device_limit", "get_mm_bmm_format_nd", "get_stream_limit", "is_jit_compile_false",
    "reset_stream_limit", "set_aoe", "set_compile_mode", "set_device_limit", "set_mm_bmm_format_nd",
    "set_option", "set_stream_limit", "finalize_dump", "init_dump", "set_dump",
]
