"""Every environment variable the package reads has one rule: a bad value (negative, too
large, not a number, infinite) is refused with an error naming the variable, the value
and what it accepts; an empty value means unset; good values still work.

Variables the C++ runtime reads once per process are tried one value per fresh
interpreter; the ones Python reads on each use are tried in one interpreter each.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MiB = 1 << 20


def _child(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    child_env = {k: v for k, v in os.environ.items() if k not in env}
    child_env.update(env)
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH", "")) if p)
    child_env.setdefault("TORCH_NPU_MEMORY_CAPACITY_MB", "1024")
    child_env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    return subprocess.run([sys.executable, "-c", code], env=child_env, capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)


_REPORT = """
import json, torch
try:
    import torch_npu
    value = {probe}
    print("VALUE" + json.dumps(value))
except Exception as exc:
    print("ERROR" + json.dumps([type(exc).__name__, str(exc).splitlines()[0]]))
"""


def _probe(probe: str, env: dict[str, str]):
    """("value", v) or ("error", type name, first line); the child must not crash."""
    result = _child(_REPORT.format(probe=probe), env)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith(("VALUE", "ERROR")))
    if line.startswith("VALUE"):
        return ("value", json.loads(line[5:]))
    return ("error", *json.loads(line[5:]))


def _assert_refused(outcome, name: str, raw: str) -> None:
    assert outcome[0] == "error", f"{name}={raw!r} was accepted: {outcome}"
    message = outcome[2]
    assert f"{name}={raw!r} is not valid" in message, message
    assert f"{name} must be" in message, message


_CAPACITY = "torch.empty(1, device='npu') is not None and torch.npu.get_device_properties(0).total_memory"


@pytest.mark.parametrize("raw", ["-5", "0", "99999999999999999999", "1048577", "abc", "1e3", "12MB", " 64"])
def test_memory_capacity_refuses_bad_values(raw):
    _assert_refused(_probe(_CAPACITY, {"TORCH_NPU_MEMORY_CAPACITY_MB": raw}), "TORCH_NPU_MEMORY_CAPACITY_MB", raw)


def test_memory_capacity_good_and_empty_values():
    assert _probe(_CAPACITY, {"TORCH_NPU_MEMORY_CAPACITY_MB": "256"}) == ("value", 256 * MiB)
    unset = _probe("torch.npu.get_device_properties(0).total_memory", {"TORCH_NPU_MEMORY_CAPACITY_MB": ""})
    assert unset[0] == "value" and unset[1] > 1024 * MiB  # the card's own memory


_COUNT = "torch.npu.device_count()"


@pytest.mark.parametrize("raw", ["-1", "0", "65", "99999999999999999999", "two", "2.0"])
def test_device_count_refuses_bad_values(raw):
    outcome = _probe("torch.npu.init() or torch.npu.device_count()", {"TORCH_NPU_DEVICE_COUNT": raw})
    _assert_refused(outcome, "TORCH_NPU_DEVICE_COUNT", raw)


def test_device_count_good_and_empty_values():
    assert _probe(_COUNT, {"TORCH_NPU_DEVICE_COUNT": "3"}) == ("value", 3)
    assert _probe(_COUNT, {"TORCH_NPU_DEVICE_COUNT": ""}) == ("value", 2)


def test_device_model_refuses_unknown_names_and_empty_means_generic():
    outcome = _probe("torch.npu.get_device_name(0)", {"TORCH_NPU_DEVICE_MODEL": "Ascend999Z"})
    _assert_refused(outcome, "TORCH_NPU_DEVICE_MODEL", "Ascend999Z")
    assert "Ascend910B" in outcome[2]  # the models it takes are listed
    assert _probe("torch.npu.get_device_name(0)", {"TORCH_NPU_DEVICE_MODEL": ""}) == ("value", "Simulated Ascend NPU")


_SPLIT = "torch.empty(1, device='npu') is not None and torch.npu.memory_stats(0)['max_split_size']"


@pytest.mark.parametrize("conf", ["max_split_size_mb:-5", "max_split_size_mb:99999999999999999999",
                                  "max_split_size_mb:8796093022208", "max_split_size_mb:1",
                                  "max_split_size_mb:abc", "max_split_size_mb:", "roundup_power2_divisions:-4",
                                  "roundup_power2_divisions:[-64:4]"])
def test_alloc_conf_refuses_bad_numbers(conf):
    outcome = _probe(_SPLIT, {"PYTORCH_NPU_ALLOC_CONF": conf})
    assert outcome[0] == "error", outcome
    assert f"Invalid PYTORCH_NPU_ALLOC_CONF='{conf}'" in outcome[2]
    assert conf.split(":")[0] in outcome[2]


def test_alloc_conf_good_values():
    assert _probe(_SPLIT, {"PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:21"}) == ("value", 21 * MiB)
    largest = _probe(_SPLIT, {"PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:8796093022207"})
    assert largest == ("value", 8796093022207 * MiB)
    assert _probe(_SPLIT, {"PYTORCH_NPU_ALLOC_CONF": ""}) == ("value", -1)  # no limit: SIZE_MAX, as on CUDA


# Variables Python reads on each use: every value in one interpreter.
_PY_PROBE = """
import json, os, torch, torch_npu
from torch_npu.distributed import _backend
from torch_npu.npu import _stream_sanitizer
probes = {
    "HCCL_EXEC_TIMEOUT": lambda: _backend.resolve_timeouts(None)[1].total_seconds(),
    "HCCL_CONNECT_TIMEOUT": lambda: _backend.resolve_timeouts(None)[0].total_seconds(),
    "TORCH_HCCL_DUMP_AFTER_SEC": _backend._dump_after_s,
    "TORCH_HCCL_SHARED_BOARD": _backend.shared_board_requested,
    "TORCH_NPU_SANITIZER": _stream_sanitizer.enabled_by_environment,
}
results = []
for name, raw in json.loads(os.environ["PROBES"]):
    os.environ[name] = raw
    try:
        results.append(["value", probes[name]()])
    except Exception as exc:
        results.append(["error", type(exc).__name__, str(exc).splitlines()[0]])
    del os.environ[name]
print("RESULTS" + json.dumps(results))
"""

_PY_BAD = {
    "HCCL_EXEC_TIMEOUT": ["1e400", "inf", "nan", "-5", "0", "2147483648", "soon"],
    "HCCL_CONNECT_TIMEOUT": ["1e400", "-1", "0", "99999999999999999999", "x"],
    "TORCH_HCCL_DUMP_AFTER_SEC": ["1e400", "-1", "nan", "later"],
    "TORCH_HCCL_SHARED_BOARD": ["2", "-1", "maybe"],
    "TORCH_NPU_SANITIZER": ["2", "maybe", "-1"],
}
_PY_GOOD = {
    "HCCL_EXEC_TIMEOUT": [("7", 7.0), ("0.5", 0.5), ("", 1800.0)],
    "HCCL_CONNECT_TIMEOUT": [("9", 9.0), ("", 120.0)],
    "TORCH_HCCL_DUMP_AFTER_SEC": [("0", 0.0), ("2.5", 2.5), ("", 0.0)],
    "TORCH_HCCL_SHARED_BOARD": [("0", False), ("1", True), ("", True)],
    "TORCH_NPU_SANITIZER": [("0", False), ("", False)],
}


def test_python_read_variables_refuse_bad_values_and_take_good_ones():
    bad = [(name, raw) for name, values in _PY_BAD.items() for raw in values]
    good = [(name, raw) for name, values in _PY_GOOD.items() for raw, _ in values]
    result = _child(_PY_PROBE, {"PROBES": json.dumps(bad + good)})
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULTS"))
    outcomes = json.loads(line[len("RESULTS"):])
    for (name, raw), outcome in zip(bad, outcomes[: len(bad)]):
        assert outcome[0] == "error" and outcome[1] == "ValueError", (name, raw, outcome)
        assert f"{name}={raw!r} is not valid: {name} must be" in outcome[2], outcome
    expected = [value for values in _PY_GOOD.values() for _, value in values]
    assert [o[1] if o[0] == "value" else o for o in outcomes[len(bad):]] == expected
