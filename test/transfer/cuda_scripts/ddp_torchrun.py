"""DistributedDataParallel training written for CUDA, launched with torchrun (synthetic data).

In the style of PyTorch's DDP tutorial and examples: ``torch.cuda.set_device(local_rank)``,
the backend chosen by ``dist.is_nccl_available()``, a DistributedSampler, DDP with
``device_ids=[local_rank]``, a checkpoint saved by rank 0 and loaded by every rank with
``map_location={"cuda:0": f"cuda:{local_rank}"}``, and ``torch.cuda.max_memory_allocated
(device)`` reported. Rank 0 prints what every rank computed as JSON; falls back to cpu and
gloo where CUDA is unavailable.

The ranks hand their reports to rank 0 through files in ``--out-dir``, not through
``all_gather_object``: the script's last collective is then a barrier issued outside
backward, which holds no Python object. With PyTorch 2.13 and Gloo, a program whose last
collective holds one (``all_gather_object``'s tensors are created in Python) can abort at
exit ("terminate called without an active exception"): Gloo's worker thread releases a
finished collective only after waking the caller, the release takes the GIL, and a thread
taking the GIL of an interpreter that is finalising is terminated. ``destroy_process_group()``
does not stop that thread here, because constructing DDP imports
``torch.distributed.nn.functional``, whose default arguments keep the default group alive
until the process ends (docs/distributed.md, "Exit").
"""
import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out-dir", default=".")
    args = parser.parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend="nccl" if dist.is_nccl_available() else "gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(96, 20), torch.randint(0, 5, (96,)))
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5)).to(device)
    ddp_model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.Adam(ddp_model.parameters(), lr=1e-2)

    losses = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp_model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())

    checkpoint = os.path.join(args.out_dir, "ddp_checkpoint.pt")
    if rank == 0:
        torch.save(ddp_model.state_dict(), checkpoint)
    dist.barrier()
    map_location = {"cuda:0": f"cuda:{local_rank}"} if device.type == "cuda" else None
    state = torch.load(checkpoint, map_location=map_location)
    ddp_model.load_state_dict(state)

    report = {
        "rank": rank,
        "losses": losses,
        "parameters": {k: v.detach().cpu().flatten().tolist() for k, v in ddp_model.module.state_dict().items()},
        "parameter_device": str(next(ddp_model.parameters()).device),
        "loaded_devices": sorted({str(t.device) for t in state.values()}),
        "max_memory_allocated_positive": torch.cuda.max_memory_allocated(device) > 0 if device.type == "cuda" else None,
        "backend": dist.get_backend(),
    }
    with open(report_path(args.out_dir, rank), "w") as f:
        json.dump(report, f)
    dist.barrier()  # every rank's report is written
    if rank == 0:
        reports = []
        for other in range(world_size):
            with open(report_path(args.out_dir, other)) as f:
                reports.append(json.load(f))
        print(json.dumps(reports))
    dist.destroy_process_group()


def report_path(out_dir, rank):
    return os.path.join(out_dir, f"ddp_report_rank{rank}.json")


if __name__ == "__main__":
    main()
