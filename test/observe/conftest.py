"""Shared set-up for the tests of what observes the npu (profiler, sanitizer, logs):
the device, and the sanitizer and current streams restored between tests."""
import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)


@pytest.fixture(autouse=True)
def _restore_streams_and_sanitizer():
    yield
    from torch_npu.npu import _stream_sanitizer

    _stream_sanitizer.disable_npu_sanitizer()
    for index in range(torch.npu.device_count()):
        torch.npu.set_stream(torch.npu.default_stream(index))
    torch.npu.set_device(0)


@pytest.fixture
def sanitizer():
    """The npu stream sanitizer, enabled for the test (and disabled after it)."""
    import torch.npu._sanitizer as san

    san.enable_npu_sanitizer()
    return san
