"""DTensor strategies of the npu operators (seed section 5): ``import torch_npu`` registers
none and imports no torch_npu.distributed module; importing or first touching
torch_npu.distributed.tensor registers them through DTensor's register_sharding, and a
DTensor then flows through the npu operator with the same numbers as the full computation."""
from __future__ import annotations

import json

from fresh_interpreter import run_python
from launcher import torchrun

REGISTERED = """
import json, sys, torch
import torch_npu
from torch.distributed.tensor import DTensor  # DTensor itself loaded, our strategies not

def npu_ops_with_strategies():
    funcs = DTensor._op_dispatcher.sharding_propagator.op_strategy_funcs
    return sorted(str(op) for op in funcs if str(op).startswith("npu."))

before = {"ops": npu_ops_with_strategies(),
          "modules": sorted(m for m in sys.modules if m.startswith("torch_npu.distributed"))}
registered = torch_npu.distributed.tensor.registered_ops  # first attribute access
after = {"ops": npu_ops_with_strategies(), "registered": list(registered),
         "modules": sorted(m for m in sys.modules if m.startswith("torch_npu.distributed"))}
print(json.dumps({"before": before, "after": after}))
"""


def test_strategies_are_registered_on_first_access_only():
    report = json.loads(run_python(REGISTERED).strip().splitlines()[-1])
    assert report["before"] == {"ops": [], "modules": []}
    after = report["after"]
    assert "npu_fusion_attention.default" in after["registered"]
    assert after["ops"] == sorted(f"npu.{name}" for name in after["registered"])
    assert "torch_npu.distributed.tensor" in after["modules"]


def test_sharded_npu_operator_matches_the_full_computation():
    launch = torchrun("dtensor_npu_ops.py", timeout=240)
    assert launch.returncode == 0, launch.explain()
    for rank in (0, 1):
        r = launch.result(rank)
        assert r["loaded_before"] is False and r["before"] == "no strategy"
        assert {"npu_fusion_attention.default", "npu_fusion_attention_grad.default"} <= set(r["registered"])
        assert r["attention"] == {"placements": ["S(0)"], "local_batch": 2, "output": True, "grads": True}
        assert all(r["other_families"].values()), r["other_families"]
