"""Shared set-up for the tests of what observes the npu (profiler, sanitizer, logs):
the device, and the current streams restored between tests."""
import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)


@pytest.fixture(autouse=True)
def _restore_streams():
    yield
    for index in range(torch.npu.device_count()):
        torch.npu.set_stream(torch.npu.default_stream(index))
    torch.npu.set_device(0)
