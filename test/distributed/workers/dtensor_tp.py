"""DeviceMesh, DTensor and tensor parallelism on npu over hccl, against the same computation on
one process with plain tensors. With 2 ranks the meshes are (2,) and (1, 2); with 4, (4,) and (2, 2)."""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_module, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from harness import report, use_local_npu

dev = use_local_npu()
dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
result = {}


def close(a, b, tol=1e-5):
    return torch.allclose(a.detach().cpu().float(), b.detach().cpu().float(), rtol=tol, atol=tol)


# --- 1-D mesh: distribute, redistribute, compute --------------------------------------------
mesh = init_device_mesh("npu", (world,))
result["mesh_device"] = mesh.device_type
torch.manual_seed(0)
x, w = torch.randn(8, 6), torch.randn(6, 5)
dx = distribute_tensor(x.to(dev), mesh, [Shard(0)])
dw = distribute_tensor(w.to(dev), mesh, [Replicate()])
result["local_shard"] = list(dx.to_local().shape)
result["local_on_npu"] = dx.to_local().device.type == "npu"
result["roundtrip"] = close(dx.full_tensor(), x)
result["redistribute"] = close(dx.redistribute(mesh, [Replicate()]).to_local(), x)
result["matmul"] = close((dx @ dw).full_tensor(), x @ w)
result["sum"] = close(dx.sum().full_tensor(), x.sum())
sharded_cols = distribute_tensor(w.to(dev), mesh, [Shard(1)])
result["shard_to_shard"] = close(sharded_cols.redistribute(mesh, [Shard(0)]).full_tensor(), w)


# --- distribute_module with a partition function ----------------------------------------------
class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 4)

    def forward(self, t):
        return self.lin(t)


torch.manual_seed(1)
plain = Tiny()
dist_mod = Tiny()
dist_mod.load_state_dict(plain.state_dict())


def shard_weights(name, module, device_mesh):
    for pname, p in list(module.named_parameters(recurse=False)):
        module.register_parameter(pname, torch.nn.Parameter(distribute_tensor(p, device_mesh, [Shard(0)])))


dist_mod = distribute_module(dist_mod.to(dev), mesh, shard_weights,
                             input_fn=lambda mod, inputs, m: tuple(distribute_tensor(i, m, [Replicate()]) for i in inputs))
out = dist_mod(x.to(dev))
result["distribute_module"] = isinstance(out, DTensor) and close(out.full_tensor(), plain(x))


# --- tensor parallel MLP: colwise then rowwise -------------------------------------------------
class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Linear(6, 16)
        self.w2 = torch.nn.Linear(16, 6)

    def forward(self, t):
        return self.w2(torch.relu(self.w1(t)))


def tp_check(tp_mesh, tag):
    torch.manual_seed(2)
    ref = MLP()
    tp = MLP()
    tp.load_state_dict(ref.state_dict())
    tp = parallelize_module(tp.to(dev), tp_mesh, {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
    inp = torch.randn(4, 6)
    ref_out = ref(inp)
    tp_out = tp(inp.to(dev))
    ref_out.sum().backward()
    tp_out.sum().backward()
    grads_ok = all(close(p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad, q.grad)
                   for p, q in zip(tp.parameters(), ref.parameters()))
    # One optimizer step on both; the parameters must stay equal.
    for model in (ref, tp):
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
    params_ok = all(close(p.full_tensor(), q) for p, q in zip(tp.parameters(), ref.parameters()))
    result[f"tp_{tag}"] = {"output": close(tp_out, ref_out), "grads": grads_ok, "step": params_ok,
                           "w1_local": list(tp.w1.weight.to_local().shape)}


tp_check(mesh, "1d")

# --- 2-D mesh: data parallel x tensor parallel -----------------------------------------------
shape = (2, 2) if world == 4 else (1, world)
mesh2 = init_device_mesh("npu", shape, mesh_dim_names=("dp", "tp"))
result["mesh2_shape"] = list(mesh2.shape)
result["mesh2_sub"] = [mesh2["dp"].size(), mesh2["tp"].size()]
d2 = distribute_tensor(x.to(dev), mesh2, [Shard(0), Shard(1)])
result["mesh2_roundtrip"] = close(d2.full_tensor(), x)
result["mesh2_matmul"] = close((d2 @ distribute_tensor(w.to(dev), mesh2, [Replicate(), Replicate()])).full_tensor(), x @ w)
tp_check(mesh2["tp"], "2d")
report(**result)
dist.destroy_process_group()
