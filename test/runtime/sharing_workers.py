"""Worker functions for test_npu_multiprocessing.py: spawned children import them by name."""
from __future__ import annotations

import torch
import torch_npu  # noqa: F401  (the npu device)


def read_write_then_read_again(tensor, results, parent_wrote):
    """Report what the tensor holds, multiply it by 10 in place, then report the parent's write."""
    results.put(("read", str(tensor.device), tensor.cpu().tolist()))
    tensor.mul_(10)
    results.put(("written",))
    parent_wrote.wait(60)
    results.put(("read_again", tensor.cpu().tolist()))


class NpuSquares(torch.utils.data.Dataset):
    """Items made on the npu inside the worker: the square of the index, 3 times."""

    def __len__(self):
        return 8

    def __getitem__(self, index):
        return torch.full((3,), float(index), device="npu") ** 2
