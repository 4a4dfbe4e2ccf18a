"""``npu-smi`` for the simulated cards: the layouts monitoring scripts parse, the card
model and HBM capacity the runtime reports, and clear errors for a card that does not
exist. Runs ``python -m torch_npu.toolkit.npu_smi`` and, when installed, the console script."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fresh_interpreter import REPO_ROOT, run_python  # noqa: E402

_SCRIPT = shutil.which("npu-smi") or (
    os.path.join(os.path.dirname(sys.executable), "npu-smi")
    if os.path.exists(os.path.join(os.path.dirname(sys.executable), "npu-smi")) else None
)
_COMMANDS = [[sys.executable, "-m", "torch_npu.toolkit.npu_smi"]] + ([[_SCRIPT]] if _SCRIPT else [])

# What a typical monitoring script matches: the first and second row of each card's block.
_CARD_ROW = re.compile(r"^\|\s+(\d+)\s+(\S+)\s+\|\s+(\w+)\s+\|\s+([\d.]+)\s+(\d+)\s+(\d+)\s*/\s*(\d+)\s+\|$")
_CHIP_ROW = re.compile(
    r"^\|\s+(\d+)\s+\|\s+([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s+\|"
    r"\s+(\d+)\s+(\d+)\s*/\s*(\d+)\s+(\d+)\s*/\s*(\d+)\s+\|$"
)
_KEY_VALUE = re.compile(r"^\s*(.+?)\s*:\s*(.*)$")
# The card's own HBM (an empty value is unset), in npu-smi and in the runtime it is compared with;
# neither allocates.
_CARD_MEMORY = {"TORCH_NPU_MEMORY_CAPACITY_MB": ""}


def _smi(command: list[str], *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    child_env = {**os.environ, "PYTHONPATH": REPO_ROOT, **_CARD_MEMORY, **env}
    return subprocess.run([*command, *args], cwd=REPO_ROOT, env=child_env, capture_output=True, text=True,
                          timeout=300)


def _card_as_runtime_reports(env: dict[str, str]) -> dict:
    out = run_python(
        "import json, torch, torch_npu\n"
        "p = torch.npu.get_device_properties(0)\n"
        "print(json.dumps({'name': p.name, 'hbm_mb': p.total_memory >> 20}))\n",
        env={**_CARD_MEMORY, **env},
    )
    return json.loads(out)


@pytest.mark.parametrize("command", _COMMANDS, ids=lambda c: os.path.basename(c[-1]))
def test_info_table_parses_as_monitoring_scripts_do(command):
    env = {"TORCH_NPU_DEVICE_MODEL": "Ascend910B4", "TORCH_NPU_DEVICE_COUNT": "3"}
    result = _smi(command, "info", env=env)
    assert result.returncode == 0, result.stderr
    expected = _card_as_runtime_reports(env)
    lines = result.stdout.splitlines()
    assert len({len(line) for line in lines}) == 1, "every table line has the same width"
    cards = [m.groups() for m in map(_CARD_ROW.match, lines) if m]
    chips = [m.groups() for m in map(_CHIP_ROW.match, lines) if m]
    assert [int(c[0]) for c in cards] == [0, 1, 2]
    assert {c[1] for c in cards} == {expected["name"].removeprefix("Ascend")}
    assert {c[2] for c in cards} == {"OK"}
    assert len(chips) == 3 and len({c[1] for c in chips}) == 3, "one distinct bus id per card"
    for chip in chips:
        hbm_used, hbm_total = int(chip[5]), int(chip[6])
        assert hbm_total == expected["hbm_mb"] and 0 <= hbm_used <= hbm_total
    assert sum("No running processes found in NPU" in line for line in lines) == 3


@pytest.mark.parametrize("command", _COMMANDS, ids=lambda c: os.path.basename(c[-1]))
def test_reports_of_one_card(command):
    env = {"TORCH_NPU_DEVICE_COUNT": "2"}
    expected = _card_as_runtime_reports(env)

    def report(*args: str) -> dict[str, str]:
        result = _smi(command, "info", *args, env=env)
        assert result.returncode == 0, result.stderr
        return dict(m.groups() for m in map(_KEY_VALUE.match, result.stdout.splitlines()) if m)

    listing = _smi(command, "info", "-l", env=env).stdout
    assert report("-l")["Total Count"] == "2"
    assert [int(v) for v in re.findall(r"NPU ID\s*:\s*(\d+)", listing)] == [0, 1]
    usages = report("-t", "usages", "-i", "1")
    assert int(usages["HBM Capacity(MB)"]) == expected["hbm_mb"]
    assert 0 <= int(usages["HBM Usage Rate(%)"]) <= 100
    memory = report("-t", "memory", "-i", "0")
    assert int(memory["HBM Capacity(MB)"]) == expected["hbm_mb"] and int(memory["HBM Usage(MB)"]) == 0
    board = report("-t", "board", "-i", "1")
    assert board["NPU ID"] == "1" and re.fullmatch(r"[0-9A-F]{4}:[0-9A-F]{2}:00\.0", board["PCIe Bus Info"])


def test_a_card_that_does_not_exist_is_a_clear_error():
    result = _smi(_COMMANDS[0], "info", "-t", "usages", "-i", "2", env={"TORCH_NPU_DEVICE_COUNT": "2"})
    assert result.returncode == 1
    assert "card 2 does not exist" in result.stderr and "0..1" in result.stderr
    assert "Traceback" not in result.stderr
    missing_id = _smi(_COMMANDS[0], "info", "-t", "board", env={})
    assert missing_id.returncode == 2 and "-i ID" in missing_id.stderr


def test_lists_every_card_whatever_the_process_selects():
    env = {"TORCH_NPU_DEVICE_COUNT": "3", "ASCEND_RT_VISIBLE_DEVICES": "2"}
    result = _smi(_COMMANDS[0], "info", "-l", env=env)
    assert result.returncode == 0, result.stderr
    assert "Total Count                    : 3" in result.stdout
