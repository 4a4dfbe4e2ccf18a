"""``TORCH_NPU_DEVICE_MODEL``: the devices report an Ascend card and the allocator enforces
its memory, so a model that does not fit the card runs out of memory here at the same
point (up to fragmentation). Each case runs in a fresh interpreter: the model is read
once, when the device initialises."""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fresh_interpreter import run_python  # noqa: E402

GiB = 1 << 30

_REPORT = """
import json, torch, torch_npu
p = torch.npu.get_device_properties(0)
print("REPORT" + json.dumps({
    "name": torch.npu.get_device_name(0), "total_memory": p.total_memory, "cube": p.cube_core_num,
    "vector": p.vector_core_num, "l2": p.L2_cache_size, "sm": p.multi_processor_count,
    "capability": list(torch.npu.get_device_capability(0)), "bf16": torch.npu.is_bf16_supported(),
    "bf16_in_caps": torch.bfloat16 in torch.accelerator.get_device_capability(0)["supported_dtypes"],
    "mem_total": torch.npu.mem_get_info(0)[1],
}))
"""


def _report(env: dict[str, str] | None = None) -> dict:
    out = run_python(_REPORT, env=env)
    return json.loads(next(line for line in out.splitlines() if line.startswith("REPORT"))[len("REPORT"):])


def test_910b_family_reports_the_card():
    r = _report({"TORCH_NPU_DEVICE_MODEL": "910b3"})  # prefix optional, case-insensitive
    assert r["name"] == "Ascend910B3"
    assert r["total_memory"] == 64 * GiB and r["mem_total"] == 64 * GiB
    assert (r["cube"], r["vector"], r["l2"]) == (20, 40, 192 << 20)
    assert r["sm"] == 20 and r["capability"] == [2, 2] and r["bf16"] and r["bf16_in_caps"]


def test_310p_reports_the_card_and_enforces_its_capacity():
    # A 310P3 has 24 GiB: three 7 GiB tensors fit, a fourth does not. The host never
    # touches the pages of an uninitialised tensor, so this costs no real memory.
    out = run_python(
        _REPORT
        + """
GiB = 1 << 30
kept = [torch.empty(7 * GiB, dtype=torch.uint8, device="npu") for _ in range(3)]
try:
    kept.append(torch.empty(7 * GiB, dtype=torch.uint8, device="npu"))
    print("NO OOM")
except torch.OutOfMemoryError as exc:
    print("OOM", str(exc).splitlines()[0])
print("RESERVED", torch.npu.memory_reserved() // GiB)
""",
        env={"TORCH_NPU_DEVICE_MODEL": "Ascend310P3"},
    )
    r = json.loads(next(line for line in out.splitlines() if line.startswith("REPORT"))[len("REPORT"):])
    assert r["name"] == "Ascend310P3" and r["total_memory"] == 24 * GiB
    assert (r["cube"], r["vector"]) == (8, 7)
    assert not r["bf16"] and not r["bf16_in_caps"]
    assert "OOM NPU out of memory. Tried to allocate 7.00 GiB" in out
    assert "total capacity of 24.00 GiB" in out
    assert "RESERVED 21" in out


def test_unknown_model_is_a_clear_error_listing_the_known_ones():
    out = run_python(
        """
import torch, torch_npu
print("IMPORTED")
for call in (lambda: torch.ones(1, device="npu"), lambda: torch.npu.get_device_name(0)):
    try:
        call()
        print("NO ERROR")
    except RuntimeError as exc:
        print("ERR", str(exc).splitlines()[0])
print("MODELS", ",".join(torch.npu.get_device_model_names()))
""",
        env={"TORCH_NPU_DEVICE_MODEL": "Ascend999Z"},
    )
    assert "IMPORTED" in out  # import torch_npu (and so import torch with autoload) still works
    errors = [line for line in out.splitlines() if line.startswith("ERR")]
    assert len(errors) == 2
    assert "TORCH_NPU_DEVICE_MODEL='Ascend999Z' is not valid: TORCH_NPU_DEVICE_MODEL must be a known Ascend device model" in errors[0]
    assert "Ascend910B2" in errors[0] and "Ascend310P3" in errors[0]
    models = next(line for line in out.splitlines() if line.startswith("MODELS"))
    assert {"Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4", "Ascend310P3"} <= set(models[7:].split(","))
