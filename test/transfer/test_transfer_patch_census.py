"""transfer_to_npu is opt-in and changes exactly what its inventory lists.

Without ``import torch_npu.contrib.transfer_to_npu`` nothing of it is applied (no patch, no
mode, no dispatcher registration, torch.cuda as it was); with it, the torch attributes that
differ from a plain ``import torch_npu`` session (replaced or added, members of torch's
classes included, see ``test/module_census.py``) are exactly the group's listed patch
sites, no mode is left on the stack (eager calls do not pay one), and the trigger's own
patches are unchanged. Each check runs in a fresh interpreter.
"""
from __future__ import annotations

import json
import os

from module_census import import_line

TEST_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CENSUS = import_line(TEST_DIR) + """
import inspect, json, sys, types
import torch, torch.cuda, torch.distributed, torch.amp.autocast_mode, torch.amp.grad_scaler
import torch_npu

def changed_sites(before, after):
    # Module entries replaced or removed, members of torch's classes replaced, added or
    # removed, and functions added to torch._C (the bindings a CUDA build would have). New
    # module entries elsewhere are not sites: submodules and lazily bound names appear as
    # torch imports more of itself.
    return {dotted for change, scope, dotted in differences(before, after)
            if change != "added" or scope == "class" or dotted.rpartition(".")[0] == "torch._C"}

before = snapshot()
stack_before = len(torch.overrides._get_current_function_mode_stack())
__ACTION__
after = snapshot()
from torch_npu import _patches
print(json.dumps({
    "changed": sorted(changed_sites(before, after)),
    "applied_group": list(_patches.applied_group("transfer_to_npu")),
    "group_inventory": list(_patches.group_inventory("transfer_to_npu")),
    "trigger_patches": list(_patches.applied()),
    "modes_added": len(torch.overrides._get_current_function_mode_stack()) - stack_before,
    "cuda_available": torch.cuda.is_available(),
    "cuda_dispatch": torch_npu._C._cuda_as_npu_enabled(),
    "sites": __SITES__,
}))
"""


def census(python, action: str, sites: str = "[]") -> dict:
    out = python(CENSUS.replace("__ACTION__", action).replace("__SITES__", sites), env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    return json.loads(out.strip().splitlines()[-1])


def test_nothing_happens_without_the_import(python):
    result = census(python, "x = torch.ones(2, device='npu') + 1; torch.cuda.is_available()")
    assert result["applied_group"] == []
    assert result["modes_added"] == 0
    assert result["cuda_available"] is False
    assert result["cuda_dispatch"] is False
    assert result["changed"] == []


def test_with_the_import_exactly_the_inventory_is_patched(python):
    result = census(
        python,
        "import torch_npu.contrib.transfer_to_npu",
        sites="list(__import__('torch_npu._patches.transfer_to_npu', fromlist=['sites']).sites())",
    )
    assert result["applied_group"] == result["group_inventory"] == [
        "cuda_module", "autocast", "autocast_state", "custom_fwd", "grad_scaler", "generator",
        "process_group", "nccl_availability", "tensor_cuda", "storage_to", "map_location_dict", "nvtx",
        "parallel_comm", "compile_wrappers",
    ]
    assert sorted(result["changed"]) == sorted(result["sites"]), sorted(set(result["changed"]) ^ set(result["sites"]))
    assert len(result["sites"]) == 34  # fewer than the 53 of the Ascend package
    assert result["modes_added"] == 0  # eager calls pass through no mode
    assert result["cuda_dispatch"] is True
    assert result["cuda_available"] is True
    assert result["trigger_patches"] == []  # the trigger's patches are counted apart


def test_the_group_imports_no_compiler_module(python):
    out = python(
        """
        import json, sys
        import torch_npu.contrib.transfer_to_npu
        print(json.dumps(sorted(m for m in sys.modules if m.startswith(("torch._dynamo", "torch._inductor", "torch_npu.compiler")))))
        """
    )
    assert json.loads(out.strip().splitlines()[-1]) == []


def test_revert_undoes_the_whole_group(python):
    # What the overhead benchmark compares against: the same process with nothing of it left.
    result = census(
        python,
        "import torch_npu.contrib.transfer_to_npu\n"
        "from torch_npu._patches import transfer_to_npu as group\n"
        "group.revert()\n"
        "try:\n"
        "    torch.zeros(1, device='cuda'); refused = False\n"
        "except (RuntimeError, AssertionError):\n"
        "    refused = True\n"
        "assert refused and not torch.ones(1, device='npu').is_cuda\n"
        "import torch.serialization\n"
        "assert not [e for e in torch.serialization._package_registry if 'transfer_to_npu' in e[2].__module__]",
    )
    assert result["applied_group"] == []
    assert result["changed"] == []
    assert result["modes_added"] == 0
    assert result["cuda_available"] is False
    assert result["cuda_dispatch"] is False
