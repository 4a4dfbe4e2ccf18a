"""``torch_npu.npu.aclnn``: the aclnn operator library of the card (``backends.version()``).

On the card, aclnn is the CANN library that runs operators; on the simulator the cpu
kernels do, and ``backends.version()`` reports the simulated CANN release they stand for.
"""
from . import backends

__all__ = ["backends"]
