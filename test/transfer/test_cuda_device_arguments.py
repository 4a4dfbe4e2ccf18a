"""Every public ``torch.cuda`` function or class that takes a device accepts a cuda device
under transfer_to_npu, and does what ``torch.npu``'s does with the npu device of that index.

The test finds them the way a reader of the API would: it walks ``torch.cuda``'s public
callables and reads their signatures for a parameter named ``device`` or ``*_device``
(constructors for classes). Each one torch.npu serves is called with ``"cuda:1"``,
``torch.device("cuda", 1)``, ``"cuda"`` and the index ``1``, positionally and by keyword,
and its outcome (value, effect on the current device, or error) must be the one torch.npu's
function gives for the matching npu device. The few that torch.npu does not have stay
torch.cuda's own (as on a machine without CUDA) and are listed exactly.
"""
from __future__ import annotations

import json

DEVICE_WALK = r"""
import inspect, json, types
import torch
import torch_npu.contrib.transfer_to_npu  # noqa: F401

get = types.ModuleType.__getattribute__
cuda = torch.cuda

# Values for the parameters besides the device that some of them require.
OTHER_ARGUMENTS = {
    "fraction": lambda: 1.0,
    "size": lambda: 64,
    "new_state": lambda: torch.npu.get_rng_state(1),
    "pool": lambda: torch.npu.MemPool(),
    "stream_ptr": lambda: 0,
}


def device_parameters(obj):
    # A class: the first of its constructors (__init__, __new__) whose signature names a device.
    targets = [c for c in (obj.__init__, obj.__new__) if c not in (object.__init__, object.__new__)] if isinstance(obj, type) else [obj]
    for target in targets:
        try:
            parameters = list(inspect.signature(target).parameters.values())
        except (TypeError, ValueError):
            continue
        if isinstance(obj, type):
            parameters = parameters[1:]
        names = [p.name for p in parameters if p.name == "device" or p.name.endswith("_device")]
        if names:
            return parameters, names
    return None, []


def normalise(value, name):
    if isinstance(value, torch.Tensor):
        return ["tensor", str(value.dtype), value.tolist()]
    if isinstance(value, torch.Stream):
        return ["stream", str(value.device)]
    if name == "caching_allocator_alloc":
        torch.npu.caching_allocator_delete(value)
        return ["pointer", isinstance(value, int) and value != 0]
    if hasattr(value, "__enter__"):
        with value:
            inside = torch.npu.current_device()
        return ["context", type(value).__name__, inside]
    if isinstance(value, (torch.storage.TypedStorage, torch.UntypedStorage)):
        return ["storage", str(value.device), value.size()]
    return ["value", repr(value)]


def outcome(function, args, kwargs, name):
    torch.npu.set_device(0)
    try:
        value = normalise(function(*args, **kwargs), name)
    except Exception as error:  # the error itself is what is compared
        value = ["error", type(error).__name__, str(error).splitlines()[0] if str(error) else ""]
    after = torch.npu.current_device()
    torch.npu.set_device(0)
    return value + [after]


VARIANTS = [("cuda:1", "npu:1"), (torch.device("cuda", 1), torch.device("npu", 1)), ("cuda", "npu"), (1, 1)]
served = {}
unserved = []
for name in sorted(dir(cuda)):
    if name.startswith("_"):
        continue
    real = get(cuda, name)
    if isinstance(real, types.ModuleType) or not callable(real):
        continue
    parameters, device_names = device_parameters(real)
    if not device_names:
        continue
    if not hasattr(torch.npu, name):
        unserved.append([name, getattr(cuda, name) is real])
        continue
    checked = []
    for cuda_device, npu_device in VARIANTS:
        for keyword in (False, True):
            cuda_args, npu_args, cuda_kwargs, npu_kwargs = [], [], {}, {}
            for p in parameters:
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                if p.name in device_names:
                    pair = (cuda_device, npu_device)
                elif p.default is p.empty:
                    value = OTHER_ARGUMENTS[p.name]()
                    pair = (value, value)
                else:
                    continue
                if keyword or p.kind is p.KEYWORD_ONLY:
                    cuda_kwargs[p.name], npu_kwargs[p.name] = pair
                else:
                    cuda_args.append(pair[0]); npu_args.append(pair[1])
            got = outcome(getattr(cuda, name), cuda_args, cuda_kwargs, name)
            expected = outcome(getattr(torch.npu, name), npu_args, npu_kwargs, name)
            checked.append([repr(cuda_device), keyword, got == expected, got, expected])
    served[name] = checked
print(json.dumps({"served": served, "unserved": unserved}))
"""


def walk(python) -> dict:
    out = python(DEVICE_WALK, env={"TORCH_NPU_MEMORY_CAPACITY_MB": "1024"})
    return json.loads(out.strip().splitlines()[-1])


def test_every_torch_cuda_function_taking_a_device_accepts_cuda_devices(python):
    result = walk(python)
    served = result["served"]
    # The ones the issue names are among those found by the walk.
    named = {"set_device", "get_device_properties", "get_device_name", "get_device_capability",
             "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats", "mem_get_info",
             "synchronize", "device", "Stream"}
    assert named <= set(served), named - set(served)
    assert len(served) >= 30
    wrong = {name: [c for c in checks if not c[2]] for name, checks in served.items()}
    wrong = {name: checks for name, checks in wrong.items() if checks}
    assert not wrong, json.dumps(wrong, indent=1)[:4000]
    # set_device with a cuda device makes that npu current; Stream gets that npu device.
    assert served["set_device"][0][3][-1] == 1
    assert served["Stream"][0][3][:2] == ["stream", "npu:1"]
    assert served["device"][0][3][:3] == ["context", "device", 1]


def test_the_device_functions_torch_npu_lacks_stay_torch_cudas_own(python):
    result = walk(python)
    # NVML/ROCm-SMI queries and external CUDA streams: nothing in torch.npu to serve them.
    assert sorted(name for name, _ in result["unserved"]) == [
        "ComplexDoubleStorage", "ComplexFloatStorage", "clock_rate", "device_memory_used",
        "get_stream_from_external", "list_gpu_processes", "memory_usage", "power_draw", "temperature",
    ]
    assert all(untouched for _, untouched in result["unserved"])
