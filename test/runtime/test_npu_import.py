"""Import cost and laziness, checked in fresh interpreters: ``import torch_npu`` loads no
compiler module and does not initialize the device; autoload through the
``torch.backends`` entry point loads torch_npu with ``import torch``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

HEAVY_PREFIXES = ("torch._dynamo", "torch._inductor", "triton", "torch_npu.compiler", "npugraph_ex", "torch_npu.dynamo")


def _run(code: str, autoload: str = "0", extra_env: dict | None = None) -> dict:
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD=autoload)
    env.update(extra_env or {})
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


# Names the compiler modules that a light import must not have loaded.
HEAVY_CHECK = f"heavy = sorted(m for m in sys.modules if m.startswith({HEAVY_PREFIXES!r}))"


def test_import_torch_npu_is_light_and_lazy():
    out = _run(
        "import sys, json\nimport torch_npu\n"
        + HEAVY_CHECK
        + """
import torch
print(json.dumps({"heavy": heavy, "initialized": torch.npu.is_initialized(),
                  "has_npu": hasattr(torch, "npu"), "count": torch.npu.device_count(),
                  "still_uninitialized": torch.npu.is_initialized()}))
"""
    )
    assert out["heavy"] == []
    assert out["initialized"] is False
    assert out["has_npu"] is True
    assert out["still_uninitialized"] is False, "device_count() must not initialize"


def test_device_module_queries_do_not_initialize():
    out = _run(
        """
import json, torch, torch_npu
# current_device() may initialize, as torch.cuda.current_device() does.
torch.npu.is_available(); torch.npu.device_count(); torch.npu.get_amp_supported_dtype()
torch.npu.amp.autocast(); hasattr(torch.npu, "NPUGraph"); dir(torch.npu)
print(json.dumps({"initialized": torch.npu.is_initialized()}))
"""
    )
    assert out["initialized"] is False


def test_graph_names_load_on_first_use():
    out = _run(
        """
import sys, json, torch, torch_npu
before = "torch_npu.npu.graphs" in sys.modules
graph_cls = torch.npu.NPUGraph
after = "torch_npu.npu.graphs" in sys.modules
torch.npu.mark_step_begin()
"""
        + HEAVY_CHECK
        + """
names = all(hasattr(torch.npu, n) for n in ("graph", "graph_pool_handle", "is_current_stream_capturing", "make_graphed_callables"))
print(json.dumps({"before": before, "after": after, "names": names, "heavy": heavy, "init": torch.npu.is_initialized()}))
"""
    )
    assert out == {"before": False, "after": True, "names": True, "heavy": [], "init": False}


def test_public_names_resolve():
    import torch

    missing = [name for name in torch.npu.__all__ if not hasattr(torch.npu, name)]
    assert missing == []


def test_first_tensor_initializes():
    out = _run(
        """
import json, torch, torch_npu
before = torch.npu.is_initialized()
torch.ones(1, device="npu")
print(json.dumps({"before": before, "after": torch.npu.is_initialized()}))
"""
    )
    assert out == {"before": False, "after": True}


def test_device_count_from_env():
    out = _run(
        'import json, torch, torch_npu; print(json.dumps({"n": torch.npu.device_count()}))',
        extra_env={"TORCH_NPU_DEVICE_COUNT": "3"},
    )
    assert out["n"] == 3


def test_bad_device_count_env_is_a_clear_error():
    result = subprocess.run(
        [sys.executable, "-c", "import torch_npu"],
        env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", TORCH_NPU_DEVICE_COUNT="two"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "TORCH_NPU_DEVICE_COUNT must be an integer" in result.stderr


def _has_autoload_entry_point() -> bool:
    return any(ep.value.startswith("torch_npu") for ep in metadata.entry_points(group="torch.backends"))


@pytest.mark.skipif(not _has_autoload_entry_point(), reason="torch_npu is not pip-installed (no torch.backends entry point)")
def test_autoload_with_import_torch():
    out = _run(
        "import sys, json\nimport torch\n"
        + HEAVY_CHECK
        + """
loaded = "torch_npu" in sys.modules
npu_module = torch.npu
modules_before = set(sys.modules)
import torch_npu
again = torch_npu.npu is npu_module and set(sys.modules) == modules_before
x = torch.ones(2, device="npu")
print(json.dumps({"loaded": loaded, "heavy": heavy, "noop": again, "device": str(x.device)}))
""",
        autoload="1",
    )
    assert out == {"loaded": True, "heavy": [], "noop": True, "device": "npu:0"}


def test_no_autoload_when_disabled():
    out = _run('import sys, json, torch; print(json.dumps({"loaded": "torch_npu" in sys.modules}))', autoload="0")
    assert out["loaded"] is False
