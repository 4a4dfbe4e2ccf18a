"""Stock DDP (plain, and with a comm hook) and FSDP2 training steps on npu over hccl under the
npu stream sanitizer, on each rank: correct PyTorch code must report nothing, and the
trained weights must equal the same run without the sanitizer. A collective finished
through its Future (wait(), then()) orders the waiting stream; read before, it races.
The launcher sets TORCH_NPU_SANITIZER=1, so the sanitizer sees the streams from the start."""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

from harness import local_rank, report, use_local_npu

device = use_local_npu()
import torch.npu._sanitizer as san  # noqa: E402

dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
STEPS = 3


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def make_model():
    torch.manual_seed(0)
    return Net().to(device)


def batch(step):
    g = torch.Generator().manual_seed(10 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def ddp(hook=None):
    model = DDP(make_model(), device_ids=[local_rank()], bucket_cap_mb=0.001)
    if hook is not None:
        model.register_comm_hook(None, hook)
    return model


def fsdp2(mp=None):
    model = make_model()
    mesh = init_device_mesh("npu", (world,))
    kw = {} if mp is None else {"mp_policy": mp}
    for b in model.blocks:
        fully_shard(b, mesh=mesh, **kw)
    return fully_shard(model, mesh=mesh, **kw)


def train(build):
    model = build()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for s in range(STEPS):
        x, y = batch(s)
        opt.zero_grad()
        # The copy of the batch comes after zero_grad(): a copy from pageable memory waits for
        # the device, which would order every stream and hide what the free must get right.
        x, y = x.to(device), y.to(device)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    params = []
    for p in model.parameters():
        p = p.full_tensor() if hasattr(p, "full_tensor") else p
        params.append(p.detach().cpu())
    return params


def sanitized(build):
    """The reports of a sanitized run (the launcher sets TORCH_NPU_SANITIZER=1), and whether
    its weights equal those of the same run unsanitized."""
    assert san.is_enabled()
    try:
        params = train(build)
        san.check()
        errors = []
    except san.NPUSanitizerErrors as e:
        errors = [str(err) for err in e.errors]
        params = None
    torch.npu.synchronize()
    san.disable_npu_sanitizer()
    plain = train(build)
    san.enable_npu_sanitizer()
    return {"errors": errors, "equal": params is not None and all(torch.equal(a, b) for a, b in zip(plain, params))}


def first_error(fn):
    try:
        fn()
    except san.NPUSanitizerErrors as e:
        return type(e.errors[0]).__name__
    return None


def futures():
    """A collective finished through its Future orders the waiting stream after it."""
    out = {}
    a = torch.full((8,), float(rank + 1), device=device)
    dist.all_reduce(a, async_op=True).get_future().wait()
    out["waited"] = first_error(lambda: a.sum())
    b = torch.full((8,), float(rank + 1), device=device)
    fut = dist.all_reduce(b, async_op=True).get_future().then(lambda f: f.value()[0].mul_(1))
    fut.wait()
    out["then"] = first_error(lambda: b.sum())
    out["then_value"] = b[0].item()
    c = torch.ones(8, device=device)
    work = dist.all_reduce(c, async_op=True)
    out["not_waited"] = first_error(lambda: c.sum())
    work.get_future().wait()
    return out


results = {
    "future_then": futures(),
    "fsdp2": sanitized(fsdp2),
    "ddp": sanitized(lambda: ddp()),
    "ddp_allreduce_hook": sanitized(lambda: ddp(default_hooks.allreduce_hook)),
    "fsdp2_mixed": sanitized(lambda: fsdp2(MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))),
}
report(**results)
dist.destroy_process_group()
