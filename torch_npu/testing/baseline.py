"""Stored baselines for tests that compare a measurement with an earlier run.

``Baseline(path)`` is a JSON file of resource id -> value (a time, a size, a count):
``get_baseline`` reads one (None when unknown), ``set_baseline`` records one,
``save_baseline`` writes the file. ``dump_baseline()`` tells whether this run should
record new baselines instead of checking them (``TORCH_NPU_DUMP_BASELINE=1``).
"""
from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["Baseline", "dump_baseline"]


def dump_baseline() -> bool:
    """True when ``TORCH_NPU_DUMP_BASELINE`` asks this run to record baselines."""
    return os.environ.get("TORCH_NPU_DUMP_BASELINE", "0") not in ("", "0")


class Baseline:
    """Baseline values of one test file, kept in a JSON file."""

    def __init__(self, baselineFile) -> None:  # noqa: N803  (Ascend's name)
        self._path = os.fspath(baselineFile)
        self._values: dict[str, Any] = {}
        if os.path.exists(self._path):
            with open(self._path) as f:
                try:
                    loaded = json.load(f)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"baseline file {self._path} is not valid JSON: {exc}") from exc
            if not isinstance(loaded, dict):
                raise ValueError(f"baseline file {self._path} must hold a JSON object")
            self._values = loaded

    def get_baseline(self, resourceId):  # noqa: N803
        """The recorded value of ``resourceId``, or None."""
        return self._values.get(str(resourceId))

    def set_baseline(self, resourceId, baseline) -> None:  # noqa: N803
        """Record ``baseline`` for ``resourceId`` (written by ``save_baseline``)."""
        json.dumps(baseline)  # only JSON values can be saved: fail here, not at save time
        self._values[str(resourceId)] = baseline

    def save_baseline(self) -> None:
        """Write every recorded value to the baseline file."""
        directory = os.path.dirname(os.path.abspath(self._path))
        os.makedirs(directory, exist_ok=True)
        with open(self._path, "w") as f:
            json.dump(self._values, f, indent=2, sort_keys=True)
