"""DTensor sharding strategies of the npu operators: none before torch_npu.distributed.tensor is
accessed, used after it. Each strategy is checked on batch-sharded DTensors against the same
operator on the full tensors in one process (forward and backward)."""
from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

import torch_npu
from harness import report, use_local_npu

dev = use_local_npu()
dist.init_process_group("hccl")
world = dist.get_world_size()
mesh = init_device_mesh("npu", (world,))
result = {"loaded_before": "torch_npu.distributed.tensor" in sys.modules}


def close(a, b, tol=1e-5):
    return torch.allclose(a.detach().cpu().float(), b.detach().cpu().float(), rtol=tol, atol=tol)


def attention_inputs():
    torch.manual_seed(0)
    # BSND: batch 4 (sharded over the ranks), sequence 8, 2 heads of 16.
    return [torch.randn(4, 8, 2, 16, requires_grad=True) for _ in range(3)]


def run_attention(q, k, v):
    return torch_npu.npu_fusion_attention(q, k, v, 2, "BSND", scale=0.25, sparse_mode=0)[0]


def sharded(ts):
    return [distribute_tensor(t.detach().to(dev), mesh, [Shard(0)]).requires_grad_() for t in ts]


# 1. Before: DTensor has no strategy for the npu operator.
try:
    run_attention(*sharded(attention_inputs()))
    result["before"] = "ran"
except NotImplementedError as e:
    result["before"] = "no strategy" if "sharding strategy" in str(e) else f"other: {e}"

# 2. First access to torch_npu.distributed.tensor registers the strategies.
registered = torch_npu.distributed.tensor.registered_ops
result["registered"] = list(registered)

# 3. After: batch-sharded attention equals the full computation, forward and backward.
full = attention_inputs()
ref = run_attention(*[t.to(dev) for t in full])
ref.sum().backward()
parts = sharded(attention_inputs())
out = run_attention(*parts)
out.sum().backward()
result["attention"] = {
    "placements": [str(p) for p in out.placements],
    "local_batch": out.to_local().shape[0],
    "output": close(out.full_tensor(), ref),
    "grads": all(close(p.grad.full_tensor(), t.grad) for p, t in zip(parts, full)),
}

# 4. The fused ops of other families, when this build has them.
checked = {}
x = torch.randn(4, 6, 8)
if "npu_rms_norm.default" in registered:
    gamma = torch.randn(8)
    xr, gr = x.clone().to(dev).requires_grad_(), gamma.clone().to(dev).requires_grad_()
    y, rstd = torch_npu.npu_rms_norm(xr, gr)
    y.sum().backward()
    xd = distribute_tensor(x.to(dev), mesh, [Shard(0)]).requires_grad_()
    gd = distribute_tensor(gamma.to(dev), mesh, [Replicate()]).requires_grad_()
    dy, drstd = torch_npu.npu_rms_norm(xd, gd)
    dy.sum().backward()  # npu_rms_norm_backward: dx sharded, dgamma a partial sum
    checked["npu_rms_norm"] = close(dy.full_tensor(), y) and close(drstd.full_tensor(), rstd) and \
        isinstance(dy, DTensor) and dy.placements[0] == Shard(0) and \
        close(xd.grad.full_tensor(), xr.grad) and close(gd.grad.full_tensor(), gr.grad, 1e-4)
if "npu_add_rms_norm.default" in registered:
    x2, gamma = torch.randn(4, 6, 8), torch.randn(8)
    ref = torch_npu.npu_add_rms_norm(x.to(dev), x2.to(dev), gamma.to(dev))
    got = torch_npu.npu_add_rms_norm(distribute_tensor(x.to(dev), mesh, [Shard(1)]),
                                     distribute_tensor(x2.to(dev), mesh, [Shard(1)]),
                                     distribute_tensor(gamma.to(dev), mesh, [Replicate()]))
    checked["npu_add_rms_norm"] = all(close(g.full_tensor(), r) for g, r in zip(got, ref))
if "npu_scaled_masked_softmax.default" in registered:
    scores, mask = torch.randn(4, 2, 6, 6), torch.rand(4, 1, 6, 6) > 0.7
    ref = torch_npu.npu_scaled_masked_softmax(scores.to(dev), mask.to(dev), 0.5)
    got = torch_npu.npu_scaled_masked_softmax(distribute_tensor(scores.to(dev), mesh, [Shard(0)]),
                                              distribute_tensor(mask.to(dev), mesh, [Shard(0)]), 0.5)
    checked["npu_scaled_masked_softmax"] = close(got.full_tensor(), ref) and got.placements[0] == Shard(0)
if "npu_swiglu.default" in registered:
    ref = torch_npu.npu_swiglu(x.to(dev), dim=-1)
    got = torch_npu.npu_swiglu(distribute_tensor(x.to(dev), mesh, [Shard(1)]), dim=-1)
    checked["npu_swiglu"] = close(got.full_tensor(), ref) and got.placements[0] == Shard(1)
if "npu_rotary_mul.default" in registered:
    r1, r2 = torch.randn(1, 6, 1, 8), torch.randn(1, 6, 1, 8)
    q4 = torch.randn(4, 6, 2, 8)
    ref = torch_npu.npu_rotary_mul(q4.to(dev), r1.to(dev), r2.to(dev))
    got = torch_npu.npu_rotary_mul(distribute_tensor(q4.to(dev), mesh, [Shard(0)]),
                                   distribute_tensor(r1.to(dev), mesh, [Replicate()]),
                                   distribute_tensor(r2.to(dev), mesh, [Replicate()]))
    checked["npu_rotary_mul"] = close(got.full_tensor(), ref) and got.placements[0] == Shard(0)
result["other_families"] = checked
report(**result)
dist.destroy_process_group()
