"""The CANN version the simulated NPU reports: one place for every caller to read it.

A real card's version comes from the installed CANN packages; the simulator has none, so
it answers as a card with a CANN release matching this torch_npu would. Components are
those ``torch_npu.utils.get_cann_version`` accepts; an unknown component answers ``""``,
as on the real package.
"""
from __future__ import annotations

SIMULATED_CANN_VERSION = "8.5.0"

COMPONENT_VERSIONS = {
    "CANN": SIMULATED_CANN_VERSION,
    "RUNTIME": SIMULATED_CANN_VERSION,
    "COMPILER": SIMULATED_CANN_VERSION,
    "HCCL": SIMULATED_CANN_VERSION,
    "TOOLKIT": SIMULATED_CANN_VERSION,
    "OPP": SIMULATED_CANN_VERSION,
    "OPP_KERNEL": SIMULATED_CANN_VERSION,
    "DRIVER": "25.5.0",
}


def get_cann_version(module="CANN"):
    """The version string of CANN (or of one of its components), ``""`` for an unknown one."""
    if not isinstance(module, str):
        raise TypeError(f"get_cann_version: module must be a str (one of {sorted(COMPONENT_VERSIONS)}), "
                        f"got {type(module).__name__}")
    return COMPONENT_VERSIONS.get(module, "")
