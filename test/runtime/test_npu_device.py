"""The device module's device management, properties, multi-device copies and the
device guard, and ``torch.accelerator`` with npu as the current accelerator."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from parameterized import parameterized

import torch_npu


def test_registered_as_torch_npu():
    assert torch.npu is torch_npu.npu
    assert torch._C._get_privateuse1_backend_name() == "npu"
    assert torch.get_device_module("npu") is torch_npu.npu


def test_availability_and_count():
    assert torch.npu.is_available()
    assert torch.npu.device_count() >= 1
    torch.ones(1, device="npu")
    assert torch.npu.is_initialized()
    torch.npu.init()  # idempotent
    assert torch.npu.is_initialized()


def test_tensor_methods_generated():
    x = torch.ones(3).npu()
    assert x.is_npu and x.device == torch.device("npu", 0)
    assert not torch.ones(1).is_npu
    m = torch.nn.Linear(2, 2).npu()
    assert m.weight.device.type == "npu"
    assert torch.ones(2).untyped_storage().npu().device.type == "npu"


def test_properties_are_a_plain_value():
    props = torch.npu.get_device_properties(0)
    assert dataclasses.is_dataclass(props)
    with pytest.raises(dataclasses.FrozenInstanceError):
        props.name = "x"
    assert props.total_memory > 0 and props.multi_processor_count > 0
    assert torch.npu.get_device_name(0) == props.name
    assert torch.npu.get_device_name() == torch.npu.get_device_name("npu:0")
    assert torch.npu.get_device_capability(0) == (props.major, props.minor)
    assert torch.npu.get_device_properties(torch.device("npu", 0)) == props


def test_current_device_follows_set_device_and_accelerator(two_devices):
    torch.npu.set_device(1)
    assert torch.npu.current_device() == 1
    assert torch.accelerator.current_device_index() == 1
    assert torch.empty(1, device="npu").device == torch.device("npu", 1)
    torch.accelerator.set_device_index(0)
    assert torch.npu.current_device() == 0
    torch.npu.set_device("npu:1")
    assert torch.npu.current_device() == 1
    torch.npu.set_device(torch.device("npu", 0))
    assert torch.npu.current_device() == 0


def test_device_context_manager_restores(two_devices):
    assert torch.npu.current_device() == 0
    with torch.npu.device(1):
        assert torch.npu.current_device() == 1
        assert torch.ones(1, device="npu").device.index == 1
        with torch.npu.device("npu:0"):
            assert torch.npu.current_device() == 0
        assert torch.npu.current_device() == 1
    assert torch.npu.current_device() == 0
    with torch.npu.device(None):
        assert torch.npu.current_device() == 0


def test_device_context_restores_on_exception(two_devices):
    with pytest.raises(KeyError):
        with torch.npu.device(1):
            raise KeyError("boom")
    assert torch.npu.current_device() == 0


def test_compiled_code_device_guard_switches_and_restores(two_devices):
    # torch.npu._DeviceGuard, the guard compiled npu code runs its body under.
    guard = torch.npu._DeviceGuard(1)
    assert (guard.idx, guard.prev_idx) == (1, -1)
    with guard:
        assert torch.npu.current_device() == 1
        assert guard.prev_idx == 0
        assert torch.empty(1, device="npu").device == torch.device("npu", 1)
        with torch.npu._DeviceGuard(0):
            assert torch.npu.current_device() == 0
        assert torch.npu.current_device() == 1
        with torch.npu._DeviceGuard(1):  # already current
            assert torch.npu.current_device() == 1
        assert torch.npu.current_device() == 1
    assert torch.npu.current_device() == 0
    with torch.npu._DeviceGuard(-1):  # negative: leaves the device alone
        assert torch.npu.current_device() == 0
        torch.npu.set_device(1)
    assert torch.npu.current_device() == 1
    torch.npu.set_device(0)
    with pytest.raises(KeyError):
        with torch.npu._DeviceGuard(1):
            raise KeyError("boom")
    assert torch.npu.current_device() == 0


def test_compiled_code_device_guard_rejects_bad_arguments(two_devices):
    with pytest.raises(RuntimeError, match="Invalid npu device index 64 for device guard"):
        torch.npu._DeviceGuard(64)
    with pytest.raises(TypeError, match="index must be an int"):
        torch.npu._DeviceGuard("npu:1")
    with pytest.raises(TypeError, match="index must be an int"):
        torch.npu._DeviceGuard(True)
    with pytest.raises(TypeError, match="exactly one argument"):
        torch.npu._DeviceGuard()
    with pytest.raises(TypeError, match="exactly one argument"):
        torch.npu._DeviceGuard(index=1)
    assert torch.npu.current_device() == 0


def test_device_of(two_devices):
    x = torch.ones(2, device="npu:1")
    with torch.npu.device_of(x):
        assert torch.npu.current_device() == 1
    with torch.npu.device_of(torch.ones(2)):
        assert torch.npu.current_device() == 0


def test_device_guard_follows_tensor_device(two_devices):
    # Ops run on the device of their inputs whatever the current device is.
    x = torch.arange(6.0, device="npu:1")
    assert torch.npu.current_device() == 0
    y = (x * 2).sum()
    assert y.device == torch.device("npu", 1)
    assert torch.npu.current_device() == 0


@parameterized.expand(
    [
        ("npu0_to_npu1", "npu:0", "npu:1"),
        ("npu1_to_npu0", "npu:1", "npu:0"),
        ("cpu_to_npu1", "cpu", "npu:1"),
        ("npu1_to_cpu", "npu:1", "cpu"),
    ]
)
def test_cross_device_copies(_name, src, dst):
    if torch.npu.device_count() < 2:
        pytest.skip("needs two npu devices")
    ref = torch.randn(5, 7)
    x = ref.to(src)
    y = x.to(dst)
    assert y.device == torch.device(dst)
    torch.testing.assert_close(y.cpu(), ref)
    # Copy into an existing, non-contiguous destination.
    out = torch.zeros(7, 5, device=dst).t()
    out.copy_(x)
    torch.testing.assert_close(out.cpu(), ref)
    # A copy is a copy: writing the destination leaves the source alone.
    y.add_(1)
    torch.testing.assert_close(x.cpu(), ref)


def test_copy_dtype_conversion(two_devices):
    x = torch.arange(10, device="npu:0")
    y = x.to("npu:1", dtype=torch.float16)
    assert y.dtype == torch.float16 and y.device.index == 1
    torch.testing.assert_close(y.cpu(), torch.arange(10, dtype=torch.float16))


def test_non_blocking_and_pinned_memory():
    ref = torch.randn(64)
    pinned = ref.pin_memory()
    assert pinned.is_pinned()
    x = pinned.to("npu", non_blocking=True)
    back = x.to("cpu", non_blocking=True)
    torch.npu.synchronize()
    torch.testing.assert_close(back, ref)


def test_mixing_devices_is_an_error(two_devices):
    a = torch.ones(3, device="npu:0")
    b = torch.ones(3, device="npu:1")
    with pytest.raises(RuntimeError, match="same device|npu:1"):
        a + b
    with pytest.raises(RuntimeError, match="same device|cpu"):
        a + torch.ones(3)
    # The runtime keeps working after the error.
    assert (a + a).sum().item() == 6


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("npu")
    assert torch.accelerator.device_count() == torch.npu.device_count()
    assert torch.accelerator.current_device_index() == torch.npu.current_device()
    s = torch.accelerator.current_stream()
    assert s.device.type == "npu" and s == torch.npu.current_stream()
    new = torch.npu.Stream()
    torch.accelerator.set_stream(new)
    assert torch.accelerator.current_stream() == new
    torch.accelerator.set_stream(torch.npu.default_stream())
    torch.accelerator.synchronize()
    with torch.accelerator.device_index(0):
        assert torch.accelerator.current_device_index() == 0


def test_torch_device_module_lookup():
    assert torch.get_device_module(torch.device("npu:0")) is torch.npu
    assert torch.get_device_module() is torch.npu
