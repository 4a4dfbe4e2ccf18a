"""``nn.DataParallel`` training written for CUDA, as in PyTorch's data-parallelism tutorial.

The model is wrapped in ``nn.DataParallel`` when more than one GPU is visible, moved to the
device with ``.to(device)``/``.cuda()``, and trained with SGD on a random dataset; each
replica reports the size of its input chunk. Prints what it computed as JSON (on cpu,
DataParallel runs the module directly, on the whole batch).
"""
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

INPUT_SIZE, OUTPUT_SIZE, BATCH_SIZE, DATA_SIZE = 5, 2, 30, 90

chunk_sizes = []


class Model(nn.Module):
    def __init__(self, input_size, output_size):
        super().__init__()
        self.fc1 = nn.Linear(input_size, 16)
        self.fc2 = nn.Linear(16, output_size)

    def forward(self, x):
        chunk_sizes.append(x.size(0))
        return self.fc2(torch.tanh(self.fc1(x)))


def make_data():
    torch.manual_seed(0)
    data = torch.randn(DATA_SIZE, INPUT_SIZE)
    target = torch.randn(DATA_SIZE, OUTPUT_SIZE)
    return data, target


def main():
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    data, target = make_data()
    loader = DataLoader(TensorDataset(data, target), batch_size=BATCH_SIZE)
    model = Model(INPUT_SIZE, OUTPUT_SIZE)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, outputs = [], []
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        output = model(x)
        loss = F.mse_loss(output, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        outputs.append(output.detach().cpu().tolist())
    module = model.module if isinstance(model, nn.DataParallel) else model
    print(json.dumps({
        "data_parallel": isinstance(model, nn.DataParallel),
        "device_count": torch.cuda.device_count(),
        "chunk_sizes": chunk_sizes,
        "losses": losses,
        "outputs": outputs,
        "output_device": str(output.device),
        "parameters": {k: v.detach().cpu().flatten().tolist() for k, v in module.state_dict().items()},
    }))


if __name__ == "__main__":
    main()
