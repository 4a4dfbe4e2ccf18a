"""Collectives of the hccl backend under the npu stream sanitizer, on each rank: used
correctly (synchronous, or waited for) they report nothing; an async collective's tensor
read or written before wait() is a race."""
from __future__ import annotations

import torch
import torch.distributed as dist
from harness import report, use_local_npu

device = use_local_npu()
import torch.npu._sanitizer as san  # noqa: E402

san.enable_npu_sanitizer()
dist.init_process_group("hccl")
rank = dist.get_rank()
results = {}


def first_error(fn):
    try:
        fn()
    except san.NPUSanitizerErrors as e:
        err = e.errors[0]
        return {"kind": type(err).__name__, "current": err.current_access.operator,
                "previous": err.previous_access.operator, "previous_stream": err.previous_access.stream}
    return None


# Synchronous: the caller's stream waits for the collective before using the result.
g = torch.ones(64, device=device) * (rank + 1)
dist.all_reduce(g)
results["sync"] = {"value": g[0].item(), "error": first_error(lambda: g.mul_(2))}

# Async and waited for: fine.
h = torch.ones(64, device=device)
work = dist.all_reduce(h, async_op=True)
work.wait()
results["waited"] = first_error(lambda: h.sum())

# Async, the result read before wait(): a race with the collective stream.
a = torch.ones(64, device=device)
work = dist.all_reduce(a, async_op=True)
results["read_before_wait"] = first_error(lambda: a.sum())
work.wait()

# Async, the buffer overwritten while the collective may still read it.
b = torch.ones(64, device=device)
work = dist.all_reduce(b, async_op=True)
results["write_before_wait"] = first_error(lambda: b.fill_(3.0))
work.wait()

# Broadcast into a buffer another stream wrote without the current stream waiting for it.
side = torch.npu.Stream()
c = torch.zeros(16, device=device)
side.wait_stream(torch.npu.current_stream())
with torch.npu.stream(side):
    c.add_(1)
results["unordered_input"] = first_error(lambda: dist.broadcast(c, src=0))
torch.npu.current_stream().wait_stream(side)
dist.broadcast(c, src=0)

# An out-of-place collective reads its input on the collective stream: an input another
# stream wrote unordered is a race, and so is overwriting it before wait().
d = torch.zeros(16, device=device)
gathered = torch.empty(32, device=device)
side.wait_stream(torch.npu.current_stream())
with torch.npu.stream(side):
    d.add_(1)
results["unordered_gather_input"] = first_error(lambda: dist.all_gather_into_tensor(gathered, d))
torch.npu.current_stream().wait_stream(side)
dist.all_gather_into_tensor(gathered, d)
e = torch.ones(16, device=device)
work = dist.all_gather_into_tensor(gathered, e, async_op=True)
results["input_write_before_wait"] = first_error(lambda: e.fill_(2.0))
work.wait()
results["gathered"] = gathered.sum().item()

# The profiler shows each collective on the collective stream's row, from issue to completion.
from torch.autograd import DeviceType  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]) as prof:
    x = torch.ones(4096, device=device)
    dist.all_reduce(x)
kernels = [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1 and e.name.startswith("hccl:")]
results["profiled"] = sorted({(e.name, e.device_resource_id) for e in kernels})

san.check()
report(**results)
dist.destroy_process_group()
