"""The CANN software stack the simulated NPU reports, in one place.

Ascend code asks for the installed CANN version (``torch_npu.npu.utils.get_cann_version``,
``torch_npu.utils.get_cann_version``) to choose code paths, and Ascend tests skip on it
(``SkipIfNotGteCANNVersion``). There is no CANN install here, so this module is the one
answer every caller shares: a recent, consistent set of component versions.
``TORCH_NPU_CANN_VERSION`` overrides the ``CANN`` entry (e.g. to run a test as on an
older stack); a malformed value is an error naming the accepted forms.
"""
from __future__ import annotations

import os
import re

__all__ = ["get_cann_version", "simulated_cann_versions"]

# Component -> version, in the formats the Ascend stack reports them.
_SIMULATED_CANN_VERSION = "8.5.0"
_DEFAULT_VERSIONS = {
    "CANN": _SIMULATED_CANN_VERSION,
    "RUNTIME": _SIMULATED_CANN_VERSION,
    "COMPILER": _SIMULATED_CANN_VERSION,
    "HCCL": _SIMULATED_CANN_VERSION,
    "TOOLKIT": _SIMULATED_CANN_VERSION,
    "OPP": _SIMULATED_CANN_VERSION,
    "OPP_KERNEL": _SIMULATED_CANN_VERSION,
    "DRIVER": "25.5.0",
}

# major.minor.RCn, major.minor.patch, major.minor.Tn, with an optional alpha suffix.
_VERSION_FORM = re.compile(r"^(\d+)\.(\d+)\.(RC|T)?(\d+)(?:[.-]?alpha\.?(\d+))?$")


def _parse(version: str) -> tuple[int, int, int, int, int]:
    """A sortable key: (major, minor, release kind, number, alpha).

    A release candidate (RCn) comes before the final releases of its minor line, a test
    build (Tn) before both, and an alpha before the build it precedes.
    """
    match = _VERSION_FORM.match(version)
    if match is None:
        raise ValueError(
            f"invalid CANN version {version!r}: expected forms like '8.3.RC1', '8.2.0', '8.1.T5' "
            "or '8.3.RC1.alpha002'"
        )
    major, minor, kind, number, alpha = match.groups()
    kind_rank = {"T": 0, "RC": 1, None: 2}[kind]
    return (int(major), int(minor), kind_rank, int(number), int(alpha) if alpha else 1 << 30)


def simulated_cann_versions() -> dict[str, str]:
    """Every component's version (the ``CANN`` entry follows ``TORCH_NPU_CANN_VERSION``)."""
    versions = dict(_DEFAULT_VERSIONS)
    override = os.environ.get("TORCH_NPU_CANN_VERSION")
    if override:
        _parse(override)
        versions["CANN"] = override
    return versions


def get_cann_version(module: str = "CANN") -> str:
    """The version string of a CANN component: ``"CANN"``, ``"RUNTIME"``, ``"COMPILER"``,
    ``"HCCL"``, ``"TOOLKIT"``, ``"OPP"``, ``"OPP_KERNEL"`` or ``"DRIVER"``. An unknown
    component answers ``""``, as on Ascend."""
    if not isinstance(module, str):
        raise TypeError(f"module must be a str naming a CANN component, got {type(module).__name__}")
    return simulated_cann_versions().get(module, "")


def _is_gte_cann_version(version: str, module: str = "CANN") -> bool:
    """Whether the installed ``module`` is at least ``version`` (False if unknown)."""
    installed = get_cann_version(module)
    if not installed:
        return False
    return _parse(installed) >= _parse(version)
