"""The device-module functions that compiled code calls trace without graph breaks
(``fullgraph=True``): they are written over ``torch.accelerator``, return plain values,
and ``torch.npu.amp.autocast`` is a real ``torch.autocast``."""
from __future__ import annotations

import pytest
import torch


def _compiled(fn):
    return torch.compile(fn, backend="eager", fullgraph=True)


def test_device_queries_fold():
    def f(x):
        if torch.npu.is_available():
            x = x + torch.npu.current_device()
        return x * torch.npu.device_count()

    x = torch.ones(3, device="npu")
    torch.testing.assert_close(_compiled(f)(x), f(x))


def test_synchronize_traces():
    def f(x):
        y = x * 2
        torch.npu.synchronize()
        return y + 1

    x = torch.ones(3, device="npu")
    torch.testing.assert_close(_compiled(f)(x), f(x))


def test_device_properties_are_constants():
    def f(x):
        props = torch.npu.get_device_properties()
        return x * props.multi_processor_count + props.major

    x = torch.ones(3, device="npu")
    torch.testing.assert_close(_compiled(f)(x), f(x))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_amp_autocast_factory_is_an_autocast_region(dtype):
    def f(x):
        with torch.npu.amp.autocast(dtype=dtype):
            return x @ x

    x = torch.ones(3, 3, device="npu")
    assert _compiled(f)(x).dtype == dtype


def test_stream_and_event_created_outside():
    s = torch.npu.Stream()
    e = torch.npu.Event()

    def f(x):
        with torch.npu.stream(s):
            y = x + 1
        e.record()
        return y * 2

    x = torch.ones(3, device="npu")
    torch.testing.assert_close(_compiled(f)(x), f(x))
