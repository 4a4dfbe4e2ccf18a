"""transfer_to_npu is opt-in and changes exactly what its inventory lists.

Without ``import torch_npu.contrib.transfer_to_npu`` nothing of it is applied (no patch, no
mode, no dispatcher registration, torch.cuda as it was); with it, the torch attributes that
differ from a plain ``import torch_npu`` session (replaced or added) are exactly the group's
listed patch sites, no mode is left on the stack (eager calls do not pay one), and the
trigger's own patches are unchanged. Each check runs in a fresh interpreter.
"""
from __future__ import annotations

import json

CENSUS = """
import inspect, json, sys, types
import torch, torch.cuda, torch.distributed, torch.amp.autocast_mode, torch.amp.grad_scaler
import torch_npu

def snapshot():
    found = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("torch") or name.startswith(("torch_npu", "torch.npu")):
            continue
        if not isinstance(module, types.ModuleType):
            continue
        entries = {"__class__": type(module)}
        for key, value in list(vars(module).items()):
            if inspect.isfunction(value) or inspect.isbuiltin(value):
                entries[key] = value
            elif inspect.isclass(value):
                entries[key] = value
                # Members of torch's own classes, e.g. a replaced __init__ or an added property.
                if value.__module__ == name:
                    for attr, member in list(vars(value).items()):
                        entries[f"{key}.{attr}"] = member
            elif key.startswith("_") and not isinstance(value, (types.ModuleType, int, float, str, bool, type(None), list, dict, set, tuple)):
                # Private binding objects (e.g. torch.cuda.nvtx._nvtx), by identity.
                entries[key] = value
        found[name] = entries
    return found

def differences(before, after):
    out = set()
    for name, attrs in before.items():
        now = after.get(name, {})
        replaced = {k for k, v in attrs.items() if k in now and now[k] is not v}
        # A replaced class's members are those of its replacement: the class is the site.
        out |= {f"{name}.{k}" for k in replaced if k.split(".")[0] not in replaced or "." not in k}
        # Attributes added to torch's classes (not new module attributes: submodules and
        # lazily bound names appear there as torch imports more of itself).
        classes = {k for k, v in attrs.items() if inspect.isclass(v) and k not in replaced}
        out |= {f"{name}.{k}" for k in now if k not in attrs and k.split(".")[0] in classes}
        # Functions added to torch._C (the bindings a CUDA build would have).
        if name == "torch._C":
            out |= {f"{name}.{k}" for k, v in now.items() if k not in attrs and "." not in k and (inspect.isfunction(v) or inspect.isbuiltin(v))}
    return out

before = snapshot()
stack_before = len(torch.overrides._get_current_function_mode_stack())
__ACTION__
after = snapshot()
from torch_npu import _patches
print(json.dumps({
    "changed": sorted(differences(before, after)),
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
