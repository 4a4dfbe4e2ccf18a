"""A CUDA training script written for CUDA, unchanged but for its first line.

It trains a small MLP in float32 and with AMP, times it with CUDA events, runs work on a side
stream and in a worker thread, captures and replays a CUDA graph, compiles the model, and
prints what it computed as JSON for the test to compare with cpu.
"""
import torch_npu.contrib.transfer_to_npu  # noqa: F401  (the one line added for Ascend)

import json
import threading

import torch
import torch.nn as nn
import torch.nn.functional as F

assert torch.cuda.is_available(), "this script needs a GPU"
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.cuda.set_device(0)
torch.backends.cudnn.benchmark = True

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 4)).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
generator = torch.Generator(device="cuda")
generator.manual_seed(1234)
data = torch.randn(64, 8, generator=generator, device="cuda")
target = torch.randint(0, 4, (64,), generator=generator, device=device)

start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
losses = []
for step in range(5):
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(data), target)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
end.record()
torch.cuda.synchronize()
elapsed_ms = start.elapsed_time(end)

scaler = torch.cuda.amp.GradScaler()
amp_losses = []
for step in range(3):
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.amp.autocast():
        amp_loss = F.cross_entropy(model(data), target)
    scaler.scale(amp_loss).backward()
    scaler.step(optimizer)
    scaler.update()
    amp_losses.append(amp_loss.item())

side_stream = torch.cuda.Stream()
side_stream.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side_stream):
    side_sum = model(data).sum()
torch.cuda.current_stream().wait_stream(side_stream)

thread_result = {}


def worker():
    x = torch.ones(4, device="cuda") * 3
    thread_result["sum"] = x.sum().item()
    thread_result["device"] = str(x.device)


thread = threading.Thread(target=worker)
thread.start()
thread.join()

static_input = torch.zeros(64, 8, device="cuda")
model.eval()
warmup = torch.cuda.Stream()
warmup.wait_stream(torch.cuda.current_stream())
with torch.no_grad(), torch.cuda.stream(warmup):
    for _ in range(2):
        model(static_input)
torch.cuda.current_stream().wait_stream(warmup)
graph = torch.cuda.CUDAGraph()
with torch.no_grad(), torch.cuda.graph(graph):
    static_output = model(static_input)
static_input.copy_(data)
graph.replay()
torch.cuda.synchronize()

compiled = torch.compile(model)
with torch.no_grad():
    compiled_output = compiled(data)

print(json.dumps({
    "losses": losses,
    "amp_losses": amp_losses,
    "elapsed_ms_nonnegative": elapsed_ms >= 0,
    "side_sum": side_sum.item(),
    "thread": thread_result,
    "graph_output": static_output.cpu().tolist(),
    "compiled_output": compiled_output.cpu().tolist(),
    "parameters": [p.detach().cpu().tolist() for p in model.parameters()],
    "parameter_device": str(next(model.parameters()).device),
    "memory_allocated_positive": torch.cuda.memory_allocated() > 0,
}))
