"""The pieces of transfer_to_npu one at a time: eager cuda device arguments sent to npu by
the dispatcher with no mode on the stack, the compile-time mode (C handler and its Python
twin agree), every thread, torch.compile, the torch.cuda redirection and whom it serves,
``is_cuda``, torch.Generator("cuda"), and "nccl" mapped to the hccl backend."""
from __future__ import annotations

import json

import pytest
import torch

import torch_npu  # noqa: F401
import torch_npu._C as _C
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


def test_backend_names_map_to_hccl():
    assert process_group.npu_backend("nccl") == "hccl"
    assert process_group.npu_backend("NCCL") == "hccl"
    assert process_group.npu_backend("cuda:nccl") == "npu:hccl"
    assert process_group.npu_backend("cpu:gloo,cuda:nccl") == "cpu:gloo,npu:hccl"
    assert process_group.npu_backend("gloo") == "gloo"
    assert process_group.npu_backend(None) is None


def last_json(out: str):
    return json.loads(out.strip().splitlines()[-1])


def test_eager_cuda_devices_dispatch_to_npu_without_a_mode(python):
    out = python(
        """
        import json
        import torch
        import torch_npu.contrib.transfer_to_npu
        cpu = torch.arange(6.0).reshape(2, 3)
        g = torch.Generator("cuda"); g.manual_seed(3)
        h = torch.Generator("npu"); h.manual_seed(3)
        calls = {
            "empty": lambda: torch.empty(3, device="cuda").fill_(2),
            "zeros": lambda: torch.zeros(2, 2, device="cuda:0"),
            "ones_device": lambda: torch.ones(2, device=torch.device("cuda")),
            "full_index1": lambda: torch.full((2,), 1.5, device=torch.device("cuda", 1)),
            "arange": lambda: torch.arange(5, device="cuda"),
            "tensor": lambda: torch.tensor([[1, 2], [3, 4]], device="cuda"),
            "to": lambda: cpu.to("cuda"),
            "to_kwargs": lambda: cpu.to(device="cuda", dtype=torch.float64, non_blocking=True),
            "cuda": lambda: cpu.cuda(),
            "cuda_index": lambda: cpu.cuda(1),
            "new_zeros": lambda: cpu.new_zeros(3, device="cuda"),
            "zeros_like": lambda: torch.zeros_like(cpu, device="cuda"),
            "randn_generator": lambda: torch.randn(4, generator=g, device="cuda"),
            "requires_grad": lambda: torch.ones(2, device="cuda", requires_grad=True) * 2,
            "module": lambda: torch.nn.Linear(3, 1).cuda().weight,
        }
        results = {}
        for name, make in calls.items():
            t = make()
            results[name] = [str(t.device), t.detach().cpu().tolist()]
        torch.set_default_device("cuda")
        results["default_device"] = [str(torch.ones(1).device), None]
        torch.set_default_device(None)
        # As for a CUDA tensor on CUDA: no copy when the tensor is already there.
        x = torch.ones(2, device="cuda")
        with torch.inference_mode():
            y = torch.ones(2, device="cuda")
            inference_alias = y.to("cuda") is y and y.cuda() is y
        aliases = [x.to("cuda") is x, x.cuda() is x, x.to("cuda:0") is x, x.to(device="cuda", dtype=torch.float32) is x,
                   x.to("cuda:1") is not x, inference_alias]
        # Gradients flow through the copies, from cpu and from another npu device.
        w = torch.ones(2, requires_grad=True); (w.to("cuda") * 3).sum().backward()
        v = torch.ones(2, device="cuda", requires_grad=True); (v.to("cuda:1") * 2).sum().backward()
        u = torch.ones(2, device="cuda", requires_grad=True); (u.cuda() * 4).sum().backward()
        print(json.dumps({
            "aliases": aliases,
            "grads": [w.grad.tolist(), v.grad.tolist(), u.grad.tolist()],
            "results": results,
            "modes": torch._C._len_torch_function_stack(),
            "randn_equals_npu_stream": results["randn_generator"][1] == torch.randn(4, generator=h, device="npu").tolist(),
        }))
        """
    )
    result = last_json(out)
    assert result["modes"] == 0
    assert result["aliases"] == [True] * 6
    assert result["grads"] == [[3.0, 3.0], [2.0, 2.0], [4.0, 4.0]]
    assert result["randn_equals_npu_stream"]
    devices = {name: device for name, (device, _) in result["results"].items()}
    assert devices.pop("full_index1") == devices.pop("cuda_index") == "npu:1"
    assert set(devices.values()) == {"npu:0"}
    values = {name: value for name, (_, value) in result["results"].items()}
    assert values["empty"] == [2.0, 2.0, 2.0]
    assert values["tensor"] == [[1, 2], [3, 4]]
    assert values["to"] == values["cuda"] == values["to_kwargs"] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert values["arange"] == [0, 1, 2, 3, 4]
    assert values["requires_grad"] == [2.0, 2.0]


def test_is_cuda_answers_scripts_for_npu_tensors_and_torch_itself_truly(python):
    out = python(
        """
        import json
        import torch
        import torch_npu.contrib.transfer_to_npu
        x, c = torch.ones(1, device="cuda"), torch.ones(1)
        internal = {}
        exec("result = x.is_cuda", {"__name__": "torch.nn.modules.rnn", "x": x}, internal)
        print(json.dumps({"script": [x.is_cuda, c.is_cuda, torch.nn.Parameter(x).is_cuda], "internal": internal["result"]}))
        """
    )
    assert last_json(out) == {"script": [True, False, True], "internal": False}


def test_every_kind_of_thread_sees_npu(python):
    out = python(
        """
        import json, sys, threading
        from concurrent.futures import ThreadPoolExecutor
        events = []
        profiler = lambda frame, event, arg: events.append(event)  # a user's profiler
        threading.setprofile(profiler)
        import torch
        import torch_npu.contrib.transfer_to_npu
        devices = {}
        def make(tag):
            devices[tag] = str(torch.zeros(1, device="cuda").device)
        t = threading.Thread(target=make, args=("thread",)); t.start(); t.join()
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(make, ["pool0", "pool1"]))
        # Autograd runs backward on its own threads.
        class F(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x): return x * 2
            @staticmethod
            def backward(ctx, g):
                devices["backward"] = str(torch.ones(1, device="cuda").device)
                return g * 2
        x = torch.ones(2, device="cuda", requires_grad=True); F.apply(x).sum().backward()
        print(json.dumps({"devices": devices, "user_profiler_ran": len(events) > 0,
                          "profiler_kept": threading.getprofile() is profiler}))
        """
    )
    result = last_json(out)
    assert set(result["devices"].values()) == {"npu:0"}
    assert set(result["devices"]) == {"thread", "pool0", "pool1", "backward"}
    assert result["user_profiler_ran"] and result["profiler_kept"]


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
        import threading
        x, w = torch.randn(3, 5), torch.randn(5, 4)
        counter = torch._dynamo.testing.CompileCounter()
        counted_f = torch.compile(f, backend=counter, fullgraph=True)
        counted = counted_f(x, w)
        inductor = torch.compile(f, backend="inductor", fullgraph=True)(x, w)
        eager = f(x, w)
        # Later calls, also from another thread, hit the same graph; eager code after a
        # compiled call runs with no mode on the stack.
        again = [counted_f(x, w)]
        t = threading.Thread(target=lambda: again.append(counted_f(x, w))); t.start(); t.join()
        print(json.dumps({"graphs": counter.frame_count, "devices": [str(t.device) for t in (counted, inductor, eager)],
                          "equal": torch.allclose(inductor, eager, atol=1e-2, rtol=1e-2) and torch.equal(counted, eager),
                          "again_equal": all(torch.equal(a, eager) for a in again) and len(again) == 2,
                          "modes_after": torch._C._len_torch_function_stack(),
                          "bf16_region": eager.dtype == torch.float32 and (eager.cpu() - (x @ w) @ (x @ w).t()).abs().max().item() > 0}))
        """
    )
    assert last_json(out) == {"graphs": 1, "devices": ["npu:0"] * 3, "equal": True, "again_equal": True,
                              "modes_after": 0, "bf16_region": True}


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
            # Stream takes a device: a subclass of torch.npu's that reads cuda devices as npu.
            "classes": [Event is torch.npu.Event,
                        issubclass(torch.cuda.Stream, torch.npu.Stream)
                        and isinstance(torch.cuda.current_stream(), torch.cuda.Stream)
                        and isinstance(torch.cuda.Stream(), torch.npu.Stream),
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
            "same_stream": torch.equal(torch.randn(5, generator=g, device="cuda").cpu(),
                                   torch.randn(5, generator=h, device="cuda").cpu()),
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


def test_nested_and_graph_broken_compiled_calls_keep_one_graph_each(python):
    out = python(
        """
        import json
        import torch
        import torch_npu.contrib.transfer_to_npu
        import torch._dynamo.testing
        counter = torch._dynamo.testing.CompileCounter()
        @torch.compile(backend=counter)
        def inner(x):
            return x + torch.ones(2, device="cuda")
        @torch.compile(backend=counter)
        def outer(x):
            y = inner(x.cuda()) * 2
            torch._dynamo.graph_break()
            return y + torch.zeros(2, device="cuda:0")
        results = [outer(torch.ones(2)) for _ in range(3)] + [inner(torch.ones(2, device="cuda"))]
        print(json.dumps({"frames": counter.frame_count, "values": [r.tolist() for r in results],
                          "devices": sorted({str(r.device) for r in results}),
                          "modes_after": torch._C._len_torch_function_stack()}))
        """
    )
    result = last_json(out)
    assert result["values"] == [[4.0, 4.0]] * 3 + [[2.0, 2.0]]
    assert result["devices"] == ["npu:0"] and result["modes_after"] == 0
    assert result["frames"] == 3  # outer's two parts and inner, each compiled once
