"""``torch_npu.npu.autocast_utils``: the module path of the npu autocast state functions.

Implemented in ``amp.autocast_mode``; gathered here under the path Ascend code imports.
"""
from __future__ import annotations

from .amp.autocast_mode import (
    get_amp_supported_dtype,
    get_autocast_dtype,
    is_autocast_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)

__all__ = ["get_amp_supported_dtype", "get_autocast_dtype", "is_autocast_enabled", "set_autocast_dtype",
           "set_autocast_enabled"]
