"""``ASCEND_RT_VISIBLE_DEVICES`` selects and renumbers the simulated cards as the Ascend
runtime does (DeepSpeed's launcher and accelerate set it per rank): device ``i`` is the
``i``-th listed card, the count is the list's length, and a malformed list, an unknown or
a repeated card is refused by the runtime and by the Python reader alike. The runtime reads
it once, so every case is a fresh interpreter."""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_PROBE = """
import json, torch, torch_npu
from torch_npu.toolkit.cards import visible_card_ids
count = torch.npu.device_count()
props = [torch.npu.get_device_properties(i) for i in range(count)]
x = torch.arange(6.0)
on_last = (x.to(f"npu:{count - 1}") * 2).cpu()
try:
    torch.ones(1, device=f"npu:{count}")
    beyond = "accepted"
except RuntimeError as exc:
    beyond = str(exc).splitlines()[0]
print(json.dumps({"count": count, "accelerator_count": torch.accelerator.device_count(),
                  "cards": visible_card_ids(), "names": [p.name for p in props],
                  "memory": [p.total_memory for p in props], "on_last_equal": torch.equal(on_last, x * 2),
                  "beyond": beyond}))
"""


def _child(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    child_env = {k: v for k, v in os.environ.items() if k not in ("ASCEND_RT_VISIBLE_DEVICES", "TORCH_NPU_DEVICE_COUNT")}
    child_env.update(env)
    child_env["PYTHONPATH"] = REPO_ROOT
    child_env["TORCH_NPU_MEMORY_CAPACITY_MB"] = "1024"
    return subprocess.run([sys.executable, "-c", code], env=child_env, capture_output=True, text=True,
                          timeout=300, cwd=REPO_ROOT)


def _probe(env: dict[str, str]) -> dict:
    result = _child(_PROBE, env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@functools.lru_cache(maxsize=None)
def _every_card() -> dict:
    return _probe({"TORCH_NPU_DEVICE_COUNT": "4", "TORCH_NPU_DEVICE_MODEL": "Ascend910B4"})


@pytest.mark.parametrize("visible, cards", [("2,0", [2, 0]), ("1", [1]), (" 3 , 1,0", [3, 1, 0]), ("", [0, 1, 2, 3])])
def test_selects_and_renumbers_the_cards(visible, cards):
    env = {"TORCH_NPU_DEVICE_COUNT": "4", "TORCH_NPU_DEVICE_MODEL": "Ascend910B4", "ASCEND_RT_VISIBLE_DEVICES": visible}
    seen = _probe(env)
    every_card = _every_card()
    assert seen["count"] == seen["accelerator_count"] == len(cards)
    assert seen["cards"] == cards
    # Device i has the properties of the card it stands for.
    assert seen["names"] == [every_card["names"][c] for c in cards]
    assert seen["memory"] == [every_card["memory"][c] for c in cards]
    assert seen["on_last_equal"]
    assert f"Invalid npu device index {len(cards)}" in seen["beyond"] or "invalid device" in seen["beyond"].lower()


@pytest.mark.parametrize("visible", ["0,0", "4", "-1", "1,,0", "0,1,2,3,4"])
def test_a_bad_list_is_refused_by_the_runtime_and_the_python_reader(visible):
    env = {"TORCH_NPU_DEVICE_COUNT": "4", "ASCEND_RT_VISIBLE_DEVICES": visible}
    expected = f"ASCEND_RT_VISIBLE_DEVICES={visible!r} is not valid: ASCEND_RT_VISIBLE_DEVICES must be"
    runtime = _child("import torch, torch_npu; torch.npu.device_count()", env)
    assert runtime.returncode == 1 and expected in runtime.stderr, runtime.stderr
    assert "between 0 and 3" in runtime.stderr
    # The Python reader, loaded on its own (importing torch_npu would consult the runtime first).
    reader = _child(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('settings', {os.path.join(REPO_ROOT, 'torch_npu', '_env_settings.py')!r})\n"
        "settings = importlib.util.module_from_spec(spec); spec.loader.exec_module(settings)\n"
        "try:\n"
        "    print(settings.read_distinct_ids('ASCEND_RT_VISIBLE_DEVICES', 4, 'ids'))\n"
        "except ValueError as exc:\n"
        "    print(exc)\n",
        env,
    )
    assert reader.returncode == 0, reader.stderr
    assert reader.stdout.strip() == f"{expected} ids"
