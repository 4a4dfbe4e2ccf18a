"""The patch policy: after a full session (import, a compile with every backend, export),
the applied patches are exactly the inventory, every listed registration is in place (the
process-wide ones of ``import torch_npu`` included, and the dispatcher holds no entry of
torch_npu's outside npu's own keys that the inventory does not list), and
no function or class on any torch module, and no member of any torch class, was replaced
or added, compared with the same session on cpu without torch_npu, but the class members
torch's public registration functions add and the module entries the listed patches replace."""
from __future__ import annotations

import json
import os

from module_census import import_line

TEST_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SNAPSHOT = import_line(TEST_DIR) + """
import inspect, json, sys, types
import torch, torch._dynamo, torch._inductor.config, torch._inductor.compile_fx, torch.export, torch.onnx

def census(before, after):
    return [f"{change} {dotted}" for change, scope, dotted in differences(before, after)
            if not dotted.rpartition(".")[2].startswith("__compiled_fn_")]

def session(device, backends):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).to(device)
    x = torch.randn(2, 4, device=device)
    for backend in backends:
        torch._dynamo.reset()
        torch.compile(model, backend=backend)(x).sum().backward()
    torch.export.export(model, (x,))
    torch.export.export(model, (x,), strict=True)

before = snapshot()
"""

CPU_SESSION = SNAPSHOT + """
session("cpu", ["eager", "aot_eager", "inductor"])
print(json.dumps(census(before, snapshot())))
"""

NPU_SESSION = SNAPSHOT + """
import torch_npu
session("npu", ["eager", "aot_eager", "npu", "npugraph_ex", "npugraphs", "inductor"])
diff = census(before, snapshot())

from torch._dynamo import trace_rules
from torch._dynamo.backends.registry import _COMPILER_FNS
from torch._dynamo.device_interface import get_interface_for_device
from torch._dynamo.utils import common_constant_types
from torch._functorch._aot_autograd.utils import supports_graphsafe_rng
from torch._inductor.codegen import common
from torch._inductor.decomposition import decompositions
from torch_npu import _patches
from torch_npu.compiler.backends import registry
from torch_npu.compiler.device_interface import NpuInterface
from torch_npu._startup import hccl_registration as _hccl_registration
from torch._logging._internal import log_registry
from multiprocessing.reduction import ForkingPickler

from torch_npu._startup import npugraph_ex_finder
from torch._C import DispatchKey
from torch._higher_order_ops.flex_attention import (
    flex_attention as flex_attention_hop, flex_attention_backward as flex_attention_backward_hop)

folded = ("get_device_properties", "get_device_name", "get_device_capability", "device_count")
# Each registration, keyed by its inventory name, checked in the process.
checks = {
    "dynamo_device_interface": get_interface_for_device("npu") is NpuInterface
        and get_interface_for_device("npu:0") is NpuInterface,
    "stream_in_graph": trace_rules.is_callable_allowed(torch.npu.stream),
    "folded_device_queries": all(id(getattr(torch.npu, n)) in trace_rules._polyfilled_function_ids for n in folded),
    "device_properties_constant": torch.npu.NpuDeviceProperties in common_constant_types,
    "graphsafe_rng": supports_graphsafe_rng(torch.device("npu")),
    "dynamo_backends": all(_COMPILER_FNS[n] is registry.ENTRIES[n] for n in registry.ENTRIES),
    "inductor_codegen": common.get_scheduling_for_device("npu") is not None,
    "inductor_device_op_overrides": "npu" in common.device_op_overrides_dict,
    "sdpa_choice": torch._fused_sdp_choice(*[torch.ones(1, 2, 3, 4, device="npu")] * 3)
        == torch._fused_sdp_choice(*[torch.ones(1, 2, 3, 4)] * 3),
    "npu_op_decompositions": torch.ops.npu.npu_rms_norm.default in decompositions,
    "hccl_backend": torch.distributed.Backend._plugins["HCCL"].creator_fn
        is _hccl_registration._create_hccl_backend
        and torch.distributed.Backend.default_device_backend_map["npu"] == "hccl",
    "log_names": log_registry.log_alias_to_log_qnames.get("npu") == ["torch_npu"]
        and {"npu_setup", "npu_inductor", "npu_graphs"} <= log_registry.artifact_names,
    "npu_profiler": torch_npu._C._profiler_registered(),
    "multiprocessing_reducers": all(
        ForkingPickler._extra_reducers[cls] is torch_npu._tensor_sharing.reduce_tensor
        for cls in (*torch._tensor_classes, torch.Tensor, torch.nn.Parameter))
        and ForkingPickler._extra_reducers[torch.UntypedStorage] is torch_npu._tensor_sharing.reduce_storage,
    "cpu_allocator_redirect": torch_npu._C._cpu_allocation_redirect_in_force(),
    # Its dispatcher entries are compared with the dispatcher's own listing below.
    "conjugate_negative_copy": all(
        torch._C._dispatch_has_kernel_for_dispatch_key(op, key)
        for op in ("aten::_copy_from", "aten::_copy_from_and_resize") for key in ("Conjugate", "Negative")),
    "accelerator": torch.accelerator.current_accelerator() == torch.device("npu")
        and torch.empty(1).pin_memory().is_pinned(),
    "import_finders": npugraph_ex_finder._finder in sys.meta_path,
    "flex_attention_autocast": all(
        getattr(hop.py_kernels.get(DispatchKey.AutocastPrivateUse1), "__module__", "")
        == "torch_npu.compiler.flex_attention_autocast" for hop in (flex_attention_hop, flex_attention_backward_hop)),
}
# atexit and os.register_at_fork have no query (atexit counts slots, and unregistering
# leaves the slot): the two registrations checked by reading the code only.
UNCHECKABLE = {"exit_handler", "fork_handler"}

# Every kernel and fallback the dispatcher holds from torch_npu's files, on a key outside
# npu's own (the PrivateUse1 family) and an operator outside the npu namespace: those reach
# code that never touches npu, and each must be a listed registration's dispatcher entry.
# (Files are matched by their folder name: the compiler may have recorded relative paths.)
def ours(line):
    return "torch_npu/" in line.partition("registered at")[2] and "PrivateUse1" not in line.split(":")[0]
outside = set()
for op in torch._C._dispatch_get_all_op_names():
    if op.startswith("npu::"):
        continue
    for line in torch._C._dispatch_dump(op).splitlines():
        if ours(line) and not line.startswith("debug:"):
            outside.add(f"{op} at {line.split(':')[0]}")
    for line in torch._C._dispatch_dump_table(op).splitlines():
        if ours(line) and "[backend fallback]" in line:
            outside.add(f"fallback at {line.split(':')[0]}")
listed = {entry for r in _patches.REGISTRATIONS.values() for entry in r.dispatcher}

# What each patch changed, exactly: the npu_backend entry of Inductor's config; the three
# RNG higher-order-op kernels that pick a device (BackendSelect of both ops, the fake and
# proxy kernels of run_and_save_rng_state); the default of the cudagraph_policy entry; the
# device check of flex_attention.
import torch.nn.attention.flex_attention as flex_attention_module
from torch._higher_order_ops.utils import registered_hop_fake_fns
from torch._prims import rng_prims
from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode
from torch_npu.compiler.inductor.reduce_overhead import NpuGraphPolicy
save, run_with = rng_prims.run_and_save_rng_state, rng_prims.run_with_rng_state
npu_aware = lambda fn: getattr(fn, "_npu_aware", False)
patched = {
    "inductor_npu_backend_option": "npu_backend" in torch._inductor.config._config,
    "rng_prims_npu": [npu_aware(save.py_kernels[DispatchKey.BackendSelect]),
                      npu_aware(registered_hop_fake_fns[save]),
                      npu_aware(save.python_key_table[ProxyTorchDispatchMode]),
                      npu_aware(run_with.py_kernels[DispatchKey.BackendSelect])] == [True] * 4,
    "inductor_cudagraph_policy": isinstance(torch._inductor.config._config["cudagraph_policy"].default,
                                            NpuGraphPolicy)
        and torch._inductor.config._config["cudagraph_policy"].default.previous is None,
    "flex_attention_device": npu_aware(flex_attention_module._validate_device),
}
print(json.dumps(diff))
print(json.dumps({"applied": list(_patches.applied()), "inventory": list(_patches.PATCHES),
                  "patched": patched,
                  "registrations": sorted(_patches.REGISTRATIONS), "checked": sorted(set(checks) | UNCHECKABLE),
                  "failing": [k for k, ok in checks.items() if not ok],
                  "process_wide": list(_patches.process_wide()),
                  "dispatcher_outside_npu": sorted(outside), "dispatcher_listed": sorted(listed)}))
"""


# The members of torch classes a torch_npu session changes, each with what changes it.
EXPECTED_CLASS_MEMBER_CHANGES = {
    # torch.utils.rename_privateuse1_backend("npu") renames the enum values of PrivateUse1.
    **{f"{change} torch._C.{enum}.{member}": "rename_privateuse1_backend"
       for enum in ("_autograd.DeviceType", "_profiler.ProfilerActivity")
       for change, member in (("added", "NPU"), ("changed", "__repr__"), ("changed", "__str__"), ("changed", "name"))},
    # torch.utils.generate_methods_for_privateuse1_backend(...): x.npu(), x.is_npu.
    **{f"added {cls}.{member}": "generate_methods_for_privateuse1_backend"
       for cls in ("torch.Tensor", "torch.nn.utils.rnn.PackedSequence", "torch.storage.TypedStorage",
                   "torch.storage._StorageBase")
       for member in ("npu", "is_npu")},
    "added torch.nn.modules.module.Module.npu": "generate_methods_for_privateuse1_backend",
    # torch.distributed.Backend.register_backend("hccl", ...) (a listed registration).
    "added torch.distributed.distributed_c10d.Backend.HCCL": "Backend.register_backend",
}

# The module entries torch_npu's patches replace, each with the patch that does.
EXPECTED_MODULE_CHANGES = {
    "changed torch.nn.attention.flex_attention._validate_device": "flex_attention_device",
}


def test_applied_patches_equal_inventory_and_nothing_else_changes_on_torch(python):
    env = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    cpu_diff = json.loads(python(CPU_SESSION, env=env).strip().splitlines()[-1])
    npu_lines = python(NPU_SESSION, env=env).strip().splitlines()
    npu_diff, inventory = json.loads(npu_lines[-2]), json.loads(npu_lines[-1])
    # torch's own lazy changes only, the same without torch_npu, but for the class members
    # torch's public registration functions add.
    assert sorted(set(npu_diff) - set(cpu_diff)) == sorted({**EXPECTED_CLASS_MEMBER_CHANGES, **EXPECTED_MODULE_CHANGES})
    assert sorted(set(cpu_diff) - set(npu_diff)) == []
    assert inventory["applied"] == inventory["inventory"] == [
        "inductor_npu_backend_option",
        "rng_prims_npu",
        "inductor_cudagraph_policy",
        "flex_attention_device",
    ]
    assert inventory["patched"] == {name: True for name in inventory["inventory"]}
    assert inventory["checked"] == inventory["registrations"]
    assert inventory["failing"] == []
    # What import torch_npu changes for code that never touches npu, by name.
    assert inventory["process_wide"] == [
        "multiprocessing_reducers", "cpu_allocator_redirect", "conjugate_negative_copy", "accelerator",
        "import_finders", "exit_handler", "fork_handler",
    ]
    # The dispatcher's own listing: every entry torch_npu made outside npu's keys is listed, and
    # every listed one is there.
    assert inventory["dispatcher_outside_npu"] == inventory["dispatcher_listed"] == [
        "aten::_copy_from at Conjugate", "aten::_copy_from at Negative",
        "aten::_copy_from_and_resize at Conjugate", "aten::_copy_from_and_resize at Negative",
    ]
