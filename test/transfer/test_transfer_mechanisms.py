"""The pieces of transfer_to_npu one at a time: device-argument rewriting (C handler and its
Python twin agree), every thread, torch.compile, the torch.cuda redirection and whom it
serves, torch.Generator("cuda"), and "nccl" mapped to the hccl backend."""
from __future__ import annotations

import json

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu import _C
from torch_npu._patches.transfer_to_npu import device_mode, process_group

CALLS = [
    (torch.empty, (3,), {"device": "cuda"}),
    (torch.zeros, (2, 2), {"device": "cuda:0"}),
    (torch.ones, (2,), {"device": torch.device("cuda")}),
    (torch.full, ((2,), 1.5), {"device": torch.device("cuda", 1)}),
    (torch.Tensor.to, (torch.ones(2), "cuda"), {}),
    (torch.Tensor.to, (torch.ones(2), torch.device("cuda", 0)), {"non_blocking": True}),
    (torch.Tensor.cuda, (torch.ones(2),), {}),
    (torch.Tensor.cuda, (torch.ones(2), 1), {}),
    (torch.tensor, ([1, 2],), {"device": "cuda"}),
    (torch.empty, (2,), {"device": "cpu"}),  # untouched
]


@pytest.mark.parametrize("call", range(len(CALLS)))
def test_c_handler_and_python_twin_rewrite_alike(call):
    func, args, kwargs = CALLS[call]
    _C._set_device_redirect_handlers(dict(device_mode.HANDLERS))
    by_c = _C._device_redirect_torch_function(None, func, (), args, kwargs)
    by_python = device_mode.python_torch_function(None, func, (), args, kwargs)
    assert by_c.device == by_python.device
    expected = "cpu" if kwargs.get("device") == "cpu" else "npu"
    assert by_c.device.type == expected


def test_c_handler_passes_other_arguments_through():
    out = _C._device_redirect_torch_function(None, torch.add, (), (torch.ones(2), torch.ones(2)), {"alpha": 2})
    assert out.tolist() == [3.0, 3.0]
    assert _C._device_redirect_torch_function(None, torch.Tensor.is_cuda.__get__, (), (torch.ones(1, device="npu"),), None) is True


def test_backend_names_map_to_hccl():
    assert process_group.npu_backend("nccl") == "hccl"
    assert process_group.npu_backend("NCCL") == "hccl"
    assert process_group.npu_backend("cuda:nccl") == "npu:hccl"
    assert process_group.npu_backend("cpu:gloo,cuda:nccl") == "cpu:gloo,npu:hccl"
    assert process_group.npu_backend("gloo") == "gloo"
    assert process_group.npu_backend(None) is None


def last_json(out: str):
    return json.loads(out.strip().splitlines()[-1])


def test_every_kind_of_thread_sees_npu(python):
    out = python(
        """
        import json, sys, threading
        from concurrent.futures import ThreadPoolExecutor
        events = []
        threading.setprofile(lambda frame, event, arg: events.append(event))  # a user's profiler
        import torch
        import torch_npu.contrib.transfer_to_npu
        devices = {}
        def make(tag):
            devices[tag] = str(torch.zeros(1, device="cuda").device)
        t = threading.Thread(target=make, args=("thread",)); t.start(); t.join()
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(make, ["pool0", "pool1"]))
        # Autograd runs backward on its own threads; the mode travels with torch's TLS.
        class F(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x): return x * 2
            @staticmethod
            def backward(ctx, g):
                devices["backward"] = str(torch.ones(1, device="cuda").device)
                return g * 2
        x = torch.ones(2, device="cuda", requires_grad=True); F.apply(x).sum().backward()
        print(json.dumps({"devices": devices, "user_profiler_ran": len(events) > 0}))
        """
    )
    result = last_json(out)
    assert set(result["devices"].values()) == {"npu:0"}
    assert set(result["devices"]) == {"thread", "pool0", "pool1", "backward"}
    assert result["user_profiler_ran"]  # chained, not replaced


def test_compiled_cuda_code_runs_on_npu_in_one_graph(python):
    out = python(
        """
        import json
        import torch
        import torch_npu.contrib.transfer_to_npu
        import torch._dynamo.testing
        def f(x, w):
            y = x.to("cuda") @ w.cuda() + torch.zeros(4, device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                z = y @ y.t()
            return z.float() + torch.ones(1, device=torch.device("cuda", 0))
        x, w = torch.randn(3, 5), torch.randn(5, 4)
        counter = torch._dynamo.testing.CompileCounter()
        counted = torch.compile(f, backend=counter, fullgraph=True)(x, w)
        inductor = torch.compile(f, backend="inductor", fullgraph=True)(x, w)
        eager = f(x, w)
        print(json.dumps({"graphs": counter.frame_count, "devices": [str(t.device) for t in (counted, inductor, eager)],
                          "equal": torch.allclose(inductor, eager, atol=1e-2, rtol=1e-2) and torch.equal(counted, eager),
                          "bf16_region": eager.dtype == torch.float32 and (eager.cpu() - (x @ w) @ (x @ w).t()).abs().max().item() > 0}))
        """
    )
    assert last_json(out) == {"graphs": 1, "devices": ["npu:0"] * 3, "equal": True, "bf16_region": True}


def test_torch_cuda_serves_scripts_and_compiled_code_from_npu_and_torch_itself_from_cuda(python):
    out = python(
        """
        import json
        import torch
        import torch_npu.contrib.transfer_to_npu
        from torch.cuda import Event, is_available
        internal = {}
        exec("result = torch.cuda.is_available()", {"__name__": "torch._some_internal", "torch": torch}, internal)
        def uses_cuda_api(x):
            torch.cuda.synchronize()
            return x + torch.cuda.is_available() + torch.cuda.current_device() + 1
        x = torch.zeros(1, device="cuda")
        compiled = [torch.compile(uses_cuda_api, backend="eager", fullgraph=True)(x).item() for _ in range(2)]
        print(json.dumps({
            "compiled": compiled, "eager": uses_cuda_api(x).item(),
            "script": [torch.cuda.is_available(), is_available(), torch.cuda.device_count() == torch.npu.device_count()],
            "classes": [Event is torch.npu.Event, torch.cuda.Stream is torch.npu.Stream,
                        torch.cuda.CUDAGraph is torch.npu.NPUGraph],
            "internal": internal["result"],
            "untouched": torch.cuda.nvtx.__name__,
        }))
        """
    )
    assert last_json(out) == {
        "compiled": [2.0, 2.0], "eager": 2.0,
        "script": [True, True, True], "classes": [True, True, True], "internal": False,
        "untouched": "torch.cuda.nvtx",
    }


def test_cuda_generator_is_an_npu_generator(python):
    out = python(
        """
        import json
        import torch
        import torch_npu.contrib.transfer_to_npu
        g = torch.Generator("cuda"); g.manual_seed(7)
        h = torch.Generator(device=torch.device("cuda", 0)); h.manual_seed(7)
        cpu = torch.Generator(); cpu.manual_seed(7)
        print(json.dumps({
            "devices": [str(g.device), str(h.device), str(cpu.device)],
            "isinstance": [isinstance(x, torch.Generator) for x in (g, torch.default_generator, torch.npu.default_generators[0])],
            "same_stream": torch.equal(torch.randn(5, generator=g, device="cuda").cpu(), torch.randn(5, generator=cpu)),
        }))
        """
    )
    assert last_json(out) == {
        "devices": ["npu:0", "npu:0", "cpu"], "isinstance": [True, True, True], "same_stream": True,
    }


def test_init_process_group_nccl_trains_ddp_on_hccl(python):
    # One process, as torchrun would start it with --nproc-per-node=1.
    out = python(
        """
        import json, os, socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        import torch, torch.distributed as dist
        import torch_npu.contrib.transfer_to_npu
        from torch.nn.parallel import DistributedDataParallel as DDP
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
        backend = dist.get_backend()
        torch.manual_seed(0)
        model = DDP(torch.nn.Linear(4, 2).cuda(), device_ids=[local_rank])
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(8, 4).cuda(), torch.randn(8, 2).cuda()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward(); opt.step()
        t = torch.ones(2, device="cuda"); dist.all_reduce(t)
        dist.destroy_process_group()
        print(json.dumps({"backend": backend, "loss": loss.item(), "sum": t.tolist(),
                          "weight": model.module.weight.detach().cpu().tolist()}))
        """,
        timeout=180,
    )
    result = last_json(out)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    assert result["backend"] == "hccl"
    assert result["sum"] == [1.0, 1.0]
    assert result["loss"] == loss.item()
    assert result["weight"] == model.weight.detach().tolist()
