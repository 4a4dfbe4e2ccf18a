"""The census helper the patch-inventory and transfer census tests share sees a replaced
class member, not only replaced module entries: a wrapper put on a torch class inside the
snapshot window is reported, and nothing is reported once it is restored."""
from __future__ import annotations

import json
import os

import torch
from module_census import differences, import_line, snapshot

TEST_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_replaced_and_an_added_class_member_are_reported():
    module_class = torch.nn.Module
    original = module_class.__dict__["extra_repr"]
    before = snapshot()
    try:
        module_class.extra_repr = lambda self: "wrapped"
        module_class._census_probe = property(lambda self: 1)
        found = differences(before, snapshot())
    finally:
        module_class.extra_repr = original
        del module_class._census_probe
    assert ("changed", "class", "torch.nn.modules.module.Module.extra_repr") in found
    assert ("added", "class", "torch.nn.modules.module.Module._census_probe") in found
    # No module entry moved: only the class member reveals the patch.
    assert [d for d in found if d[1] == "module" and "Module" in d[2]] == []
    assert [d for d in differences(before, snapshot()) if "modules.module.Module." in d[2]] == []


def test_a_wrapped_dynamo_method_is_reported(python):
    # The case module snapshots miss: ``SomeDynamoClass.method = wrapper``.
    out = python(import_line(TEST_DIR) + """
import json, functools
import torch._dynamo
from torch._dynamo.variables.torch import TorchInGraphFunctionVariable as cls
before = snapshot()
original = cls.__dict__["call_function"]
cls.call_function = functools.wraps(original)(lambda *a, **k: original(*a, **k))
patched = differences(before, snapshot())
cls.call_function = original
restored = differences(before, snapshot())
print(json.dumps([patched, restored]))
""", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    patched, restored = json.loads(out.strip().splitlines()[-1])
    site = ["changed", "class", "torch._dynamo.variables.torch.TorchInGraphFunctionVariable.call_function"]
    assert site in patched
    assert site not in restored
    assert [d for d in patched if d[1] == "module"] == [d for d in restored if d[1] == "module"]
