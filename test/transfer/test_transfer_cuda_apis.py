"""The CUDA APIs an unmodified script calls besides devices, under transfer_to_npu:
``torch.load`` of cuda checkpoints and cuda ``map_location``s, ``torch.cuda.nvtx`` as npu
profiler ranges, the autocast state functions and ``custom_fwd`` for ``"cuda"``,
``dist.is_nccl_available()``, and the ``torch._C`` copies behind ``nn.DataParallel``.
Each check runs in a fresh interpreter; where it matters, the same code is shown to fail
without the import (what a script meets today).
"""
from __future__ import annotations

import json

import pytest
import torch
import torch.serialization

import torch_npu  # noqa: F401

ENV = {"TORCH_NPU_MEMORY_CAPACITY_MB": "1024"}


def last_json(out: str):
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def gpu_checkpoint(tmp_path):
    """A checkpoint as a GPU machine writes it: storages tagged ``cuda:1``."""
    torch.manual_seed(0)
    state = {"weight": torch.randn(3, 4), "bias": torch.arange(4.0), "step": torch.tensor(7)}
    entry = (0, lambda storage: "cuda:1", lambda storage, location: None)
    torch.serialization._package_registry.insert(0, entry)
    try:
        path = tmp_path / "gpu.pt"
        torch.save(state, path)
    finally:
        torch.serialization._package_registry.remove(entry)
    return str(path), {k: v.tolist() for k, v in state.items()}


LOAD = """
import json, torch
__IMPORT__
path = __PATH__
locations = {
    "None": None, "'cuda'": "cuda", "'cuda:0'": "cuda:0", "'cuda:1'": "cuda:1",
    "device('cuda')": torch.device("cuda"), "device('cuda', 1)": torch.device("cuda", 1),
    "{'cuda:1': 'cuda:0'}": {"cuda:1": "cuda:0"},
    "lambda s, l: s.cuda(0)": lambda storage, loc: storage.cuda(0),
    "lambda s, l: s.to(device='cuda:1')": lambda storage, loc: storage.to(device="cuda:1"),
    "lambda s, l: None": lambda storage, loc: None,
    "lambda s, l: s": lambda storage, loc: storage,
    "'cpu'": "cpu",
}
out = {}
for label, location in locations.items():
    try:
        state = torch.load(path, map_location=location)
        out[label] = {k: [str(v.device), v.tolist()] for k, v in state.items()}
    except Exception as error:
        out[label] = ["error", type(error).__name__, str(error).splitlines()[0]]
print(json.dumps(out))
"""


def test_cuda_checkpoints_and_cuda_map_locations_load_onto_npu(python, gpu_checkpoint):
    path, values = gpu_checkpoint
    loaded = last_json(python(LOAD.replace("__IMPORT__", "import torch_npu.contrib.transfer_to_npu")
                              .replace("__PATH__", repr(path)), env=ENV))
    expected_device = {
        "None": "npu:1", "'cuda'": "npu:0", "'cuda:0'": "npu:0", "'cuda:1'": "npu:1",
        "device('cuda')": "npu:0", "device('cuda', 1)": "npu:1", "{'cuda:1': 'cuda:0'}": "npu:0",
        "lambda s, l: s.cuda(0)": "npu:0", "lambda s, l: s.to(device='cuda:1')": "npu:1",
        "lambda s, l: None": "npu:1", "lambda s, l: s": "cpu", "'cpu'": "cpu",
    }
    for label, device in expected_device.items():
        assert loaded[label] == {k: [device, v] for k, v in values.items()}, (label, loaded[label])


def test_without_the_import_the_same_loads_fail_as_on_a_cpu_machine(python, gpu_checkpoint):
    path, _ = gpu_checkpoint
    loaded = last_json(python(LOAD.replace("__IMPORT__", "import torch_npu").replace("__PATH__", repr(path)), env=ENV))
    assert loaded["'cuda'"][0] == "error" and "torch.cuda.is_available() is False" in loaded["'cuda'"][2]
    assert loaded["None"][0] == "error" and loaded["lambda s, l: s.cuda(0)"][0] == "error"


def test_checkpoints_saved_under_the_import_keep_npu_locations(python, tmp_path):
    out = python(
        f"""
        import json, torch
        import torch_npu.contrib.transfer_to_npu
        torch.save({{"w": torch.ones(2, device="cuda:1")}}, {str(tmp_path / "n.pt")!r})
        plain = torch.load({str(tmp_path / "n.pt")!r})["w"]
        mapped = torch.load({str(tmp_path / "n.pt")!r}, map_location="cuda:0")["w"]
        # The DDP tutorial's dict, keyed by the cuda location the script saved from.
        by_dict = torch.load({str(tmp_path / "n.pt")!r}, map_location={{"cuda:1": "cuda:0"}})["w"]
        npu_key_wins = torch.load({str(tmp_path / "n.pt")!r}, map_location={{"cuda:1": "cuda:0", "npu:1": "cpu"}})["w"]
        print(json.dumps([str(plain.device), str(mapped.device), mapped.tolist(), str(by_dict.device),
                          str(npu_key_wins.device)]))
        """,
        env=ENV,
    )
    assert last_json(out) == ["npu:1", "npu:0", [1.0, 1.0], "npu:0", "cpu"]


def test_nvtx_ranges_are_npu_profiler_ranges(python, tmp_path):
    trace = str(tmp_path / "trace.json")
    out = python(
        f"""
        import json, threading, torch
        import torch_npu.contrib.transfer_to_npu
        from torch.profiler import profile, ProfilerActivity
        nvtx = torch.cuda.nvtx
        x = torch.ones(4, device="cuda")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            depths = [nvtx.range_push("outer"), nvtx.range_push("inner")]
            y = x * 2
            depths += [nvtx.range_pop(), nvtx.range_pop(), nvtx.range_pop()]
            with nvtx.range("epoch {{}}", 3):
                y = y + 1
            nvtx.mark("checkpoint")
            handle = nvtx.range_start("across threads")
            t = threading.Thread(target=nvtx.range_end, args=(handle,)); t.start(); t.join()
            # Each thread has its own push/pop stack, as in NVTX.
            other = []
            t = threading.Thread(target=lambda: other.append(nvtx.range_pop())); t.start(); t.join()
        prof.export_chrome_trace({trace!r})
        names = [e.name for e in prof.events()]
        print(json.dumps({{"depths": depths, "other_thread_pop": other, "names": names}}))
        """,
        env=ENV,
    )
    result = last_json(out)
    # NVTX's depths: push returns the new range's depth, pop the ended one's; negative: nothing to pop.
    assert result["depths"][:4] == [0, 1, 1, 0] and result["depths"][4] < 0
    assert result["other_thread_pop"][0] < 0
    for name in ("mstx::outer", "mstx::inner", "mstx::epoch 3", "mstx::mark::checkpoint", "mstx::across threads"):
        assert name in result["names"], name
    with open(trace) as f:
        traced = {event.get("name") for event in json.load(f)["traceEvents"]}
    assert {"mstx::outer", "mstx::inner", "mstx::epoch 3"} <= traced


AUTOCAST_STATE = """
import json, torch
__IMPORT__
def state():
    return [torch.is_autocast_enabled("cuda"), str(torch.get_autocast_dtype("cuda")), torch.is_autocast_enabled(),
            str(torch.get_autocast_gpu_dtype()), torch.amp.is_autocast_available("cuda"),
            torch.amp.autocast_mode.is_autocast_available("cuda")]
outside = state()
with torch.autocast("cuda", dtype=torch.bfloat16):
    inside = state() + [torch.is_autocast_enabled("npu"), str(torch.get_autocast_dtype("npu"))]
torch.set_autocast_enabled("cuda", True); torch.set_autocast_dtype("cuda", torch.float16)
set_new = [torch.is_autocast_enabled("npu"), str(torch.get_autocast_dtype("npu"))]
torch.set_autocast_enabled(False); torch.set_autocast_gpu_dtype(torch.bfloat16)
set_legacy = [torch.is_autocast_enabled("npu"), str(torch.get_autocast_dtype("npu"))]
torch.set_autocast_dtype("npu", torch.float16)

seen = {}
class Scale(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float16)
    def forward(ctx, x):
        seen["amp"] = [str(x.dtype), torch.is_autocast_enabled("cuda")]
        return x * 2
    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        seen["bwd"] = [str(grad.dtype), torch.is_autocast_enabled("cuda")]
        return grad * 2

class Legacy(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
    def forward(ctx, x):
        seen["legacy"] = [str(x.dtype), torch.is_autocast_enabled("cuda")]
        return x + 1
    @staticmethod
    @torch.cuda.amp.custom_bwd
    def backward(ctx, grad):
        return grad

x = torch.ones(3, device="cuda", requires_grad=True)
with torch.autocast("cuda", dtype=torch.float16):
    y = Scale.apply(x)
    z = Legacy.apply(y)
    w = Scale.apply(torch.ones(3, device="cuda", dtype=torch.float16))
z.sum().backward()
print(json.dumps({"outside": outside, "inside": inside, "set": set_new, "set_legacy": set_legacy, "seen": seen,
                  "out_dtypes": [str(y.dtype), str(z.dtype)], "grad": x.grad.tolist()}))
"""


def test_autocast_state_functions_answer_for_npu(python):
    result = last_json(python(AUTOCAST_STATE.replace("__IMPORT__", "import torch_npu.contrib.transfer_to_npu"), env=ENV))
    assert result["outside"] == [False, "torch.float16", False, "torch.float16", True, True]
    assert result["inside"] == [True, "torch.bfloat16", True, "torch.bfloat16", True, True, True, "torch.bfloat16"]
    assert result["set"] == [True, "torch.float16"]
    assert result["set_legacy"] == [False, "torch.bfloat16"]


def test_custom_fwd_casts_npu_inputs_inside_cuda_autocast(python):
    result = last_json(python(AUTOCAST_STATE.replace("__IMPORT__", "import torch_npu.contrib.transfer_to_npu"), env=ENV))
    assert result["seen"] == {
        "amp": ["torch.float16", False],      # cast, and run with autocast off
        "legacy": ["torch.float32", False],   # torch.cuda.amp.custom_fwd too
        "bwd": ["torch.float16", False],      # the backward re-enters the forward's state: off
    }
    assert result["out_dtypes"] == ["torch.float16", "torch.float32"]
    assert result["grad"] == [2.0, 2.0, 2.0]


def test_without_the_import_cuda_autocast_state_is_cudas(python):
    out = python(
        """
        import json, torch, torch_npu
        with torch.autocast("npu"):
            print(json.dumps([torch.is_autocast_enabled("cuda"), torch.is_autocast_enabled("npu")]))
        """
    )
    assert last_json(out) == [False, True]


def test_nccl_is_available_and_means_hccl(python):
    out = python(
        """
        import json
        import torch.distributed as dist
        before = [dist.is_nccl_available(), dist.is_backend_available("nccl")]
        import torch_npu.contrib.transfer_to_npu
        after = [dist.is_nccl_available(), dist.is_backend_available("nccl"),
                 dist.distributed_c10d.is_nccl_available(), "nccl" if dist.is_nccl_available() else "gloo"]
        print(json.dumps({"before": before, "after": after}))
        """,
        env=ENV,
    )
    assert last_json(out) == {"before": [False, False], "after": [True, True, True, "nccl"]}


COMM = """
import json, torch
import torch_npu.contrib.transfer_to_npu
from torch.nn.parallel import comm
torch.manual_seed(0)
cpu = torch.randn(6, 4)
x = cpu.to("cuda:0")
out = {}
chunks = comm.scatter(x, [0, 1])
out["scatter"] = [[str(c.device), torch.equal(c.cpu(), r)] for c, r in zip(chunks, cpu.chunk(2))]
out["scatter_view_on_own_device"] = chunks[0].data_ptr() == x.data_ptr()
uneven = comm.scatter(x, [1, 0], chunk_sizes=[4, 2], dim=0)
out["scatter_sizes"] = [[str(c.device), list(c.shape)] for c in uneven]
gathered = comm.gather(chunks, dim=0, destination=1)
out["gather"] = [str(gathered.device), torch.equal(gathered.cpu(), cpu)]
out["gather_cpu"] = [str(comm.gather(chunks, destination=-1).device)]
out["gather_dim1"] = torch.equal(comm.gather(comm.scatter(x, [0, 1], dim=1), dim=1).cpu(), cpu)
copies = comm.broadcast(x, [0, 1])
out["broadcast"] = [copies[0] is x, str(copies[1].device), torch.equal(copies[1].cpu(), cpu)]
coalesced = comm.broadcast_coalesced([x, x[0]], [0, 1])
out["broadcast_coalesced"] = [[str(t.device) for t in per_device] for per_device in coalesced]
a, b = torch.ones(3, device="cuda:0"), torch.full((3,), 2.0, device="cuda:1")
out["reduce_add"] = [str(comm.reduce_add([a, b], 0).device), comm.reduce_add([a, b], 0).tolist()]
targets = [torch.empty(3, 4, device="cuda:0"), torch.empty(3, 4, device="cuda:1")]
comm.scatter(x, out=targets)
out["scatter_out"] = torch.equal(torch.cat([t.cpu() for t in targets]), cpu)
errors = {}
for label, call in {
    "gather_mismatch": lambda: comm.gather([torch.ones(2, 3, device="cuda:0"), torch.ones(2, 4, device="cuda:1")]),
    "broadcast_first_device": lambda: comm.broadcast(x, [1, 0]),
    "scatter_sizes": lambda: comm.scatter(x, [0, 1], chunk_sizes=[6]),
}.items():
    try:
        call(); errors[label] = None
    except Exception as error:
        errors[label] = [type(error).__name__, str(error)]
out["errors"] = errors
print(json.dumps(out))
"""


def test_data_parallel_copies_move_npu_tensors_as_on_cuda(python):
    result = last_json(python(COMM, env=ENV))
    assert result["scatter"] == [["npu:0", True], ["npu:1", True]]
    assert result["scatter_view_on_own_device"] is True
    assert result["scatter_sizes"] == [["npu:1", [4, 4]], ["npu:0", [2, 4]]]
    assert result["gather"] == ["npu:1", True] and result["gather_cpu"] == ["cpu"] and result["gather_dim1"]
    assert result["broadcast"] == [True, "npu:1", True]
    assert result["broadcast_coalesced"] == [["npu:0", "npu:0"], ["npu:1", "npu:1"]]
    assert result["reduce_add"] == ["npu:0", [3.0, 3.0, 3.0]]
    assert result["scatter_out"] is True
    errors = result["errors"]
    assert errors["gather_mismatch"][0] == "RuntimeError" and "invalid shape" in errors["gather_mismatch"][1]
    assert "must appear as the first on devices list" in errors["broadcast_first_device"][1]
    assert "same length" in errors["scatter_sizes"][1]


def test_data_parallel_trains_across_the_devices(python):
    out = python(
        """
        import json, torch, torch.nn as nn
        import torch_npu.contrib.transfer_to_npu
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        reference = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        reference.load_state_dict(model.state_dict())
        x = torch.randn(10, 4)
        parallel = nn.DataParallel(model.cuda())
        y = parallel(x.cuda())
        y.sum().backward()
        expected = reference(x)
        expected.sum().backward()
        print(json.dumps({
            "device_ids": parallel.device_ids, "output_device": str(y.device),
            "forward_equal": torch.equal(y.detach().cpu(), expected.detach()),
            "grads_close": all(torch.allclose(p.grad.cpu(), r.grad, atol=1e-6) for p, r in zip(model.parameters(), reference.parameters())),
            "grad_devices": sorted({str(p.grad.device) for p in model.parameters()}),
        }))
        """,
        env=ENV,
    )
    assert last_json(out) == {"device_ids": [0, 1], "output_device": "npu:0", "forward_equal": True,
                              "grads_close": True, "grad_devices": ["npu:0"]}


@pytest.mark.parametrize("dynamo_first", [False, True])
def test_compiled_code_reads_the_cuda_autocast_state_as_npus(python, dynamo_first):
    out = python(
        f"""
        import json, torch
        {"import torch._dynamo" if dynamo_first else ""}
        import torch_npu.contrib.transfer_to_npu
        def f(x, w):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = x @ w
                scale = 2.0 if torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda") == torch.bfloat16 else 3.0
            torch.cuda.synchronize("cuda:0")
            return y.float() * scale
        x, w = torch.randn(4, 4, device="cuda"), torch.randn(4, 4, device="cuda")
        eager = f(x, w)
        compiled = torch.compile(f, backend="eager", fullgraph=True)(x, w)
        reference = (x.cpu().bfloat16() @ w.cpu().bfloat16()).float() * 2.0
        print(json.dumps([torch.equal(eager, compiled), torch.equal(eager.cpu(), reference)]))
        """,
        env=ENV,
    )
    assert last_json(out) == [True, True]
