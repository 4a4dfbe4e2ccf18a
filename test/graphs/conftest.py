"""Shared set-up for the NPU graph tests: the npu device, and compiled code and graph
trees reset between tests."""
import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)


@pytest.fixture(autouse=True)
def _fresh_state(fresh_compiled_state):
    # Compiled code and recorded graphs are dropped by ``fresh_compiled_state`` (test/conftest.py,
    # which runs its teardown after this one); streams and the current device are reset here.
    yield
    for index in range(torch.npu.device_count()):
        torch.npu.set_stream(torch.npu.default_stream(index))
    torch.npu.set_device(0)
