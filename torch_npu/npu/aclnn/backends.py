"""``torch_npu.npu.aclnn.backends``: which aclnn operator library answers."""
from __future__ import annotations

__all__ = ["version"]


def version() -> str:
    """The aclnn version: the simulated CANN operator package (``OPP``) release."""
    from ..cann_version import get_cann_version

    return get_cann_version("OPP")
