"""Shared set-up for the npu runtime tests: loads torch_npu once and offers the device
helpers every test module uses."""
import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)


def pytest_configure(config):
    config.addinivalue_line("markers", "multidevice: needs at least two npu devices")


@pytest.fixture(autouse=True)
def _restore_current_device():
    # A test that changes the current device or stream must not leak it into the next.
    before = torch.npu.current_device()
    yield
    torch.npu.set_device(before)
    for index in range(torch.npu.device_count()):
        torch.npu.set_stream(torch.npu.default_stream(index))
    torch.npu.set_device(before)
