"""Bad input gets a clear Python error, and the runtime stays usable afterwards."""
from __future__ import annotations

import pytest
import torch
from parameterized import parameterized

import torch_npu._C as _C


@pytest.fixture(autouse=True)
def _runtime_still_works():
    yield
    x = torch.arange(4.0, device="npu")
    assert (x * 2).sum().item() == 12.0


def _bad_index():
    return torch.npu.device_count() + 5


@parameterized.expand(
    [
        ("set_device", lambda i: torch.npu.set_device(i)),
        ("device_ctx", lambda i: torch.npu.device(i)),
        ("properties", lambda i: torch.npu.get_device_properties(i)),
        ("device_name", lambda i: torch.npu.get_device_name(i)),
        ("memory_allocated", lambda i: torch.npu.memory_allocated(i)),
        ("mem_get_info", lambda i: torch.npu.mem_get_info(i)),
        ("reset_peak", lambda i: torch.npu.reset_peak_memory_stats(i)),
        ("synchronize", lambda i: torch.npu.synchronize(i)),
        ("stream", lambda i: torch.npu.Stream(device=i)),
        ("current_stream", lambda i: torch.npu.current_stream(i)),
        ("rng_state", lambda i: torch.npu.get_rng_state(i)),
        ("string_device", lambda i: torch.npu.set_device(f"npu:{i}")),
    ]
)
def test_invalid_device_index_in_device_module(_name, call):
    with pytest.raises(RuntimeError, match=r"Invalid npu device index \d+"):
        call(_bad_index())


@parameterized.expand(
    [
        ("empty", lambda d: torch.empty(2, device=d)),
        ("to", lambda d: torch.ones(2).to(d)),
        ("accelerator_set_device", lambda d: torch.accelerator.set_device_index(d)),
        ("torch_stream", lambda d: torch.Stream(device=d)),
        ("generator", lambda d: torch.Generator(device=d)),
    ]
)
def test_invalid_device_index_in_torch_apis(_name, call):
    with pytest.raises(RuntimeError, match="Invalid npu device index"):
        call(torch.device("npu", _bad_index()))


@parameterized.expand(
    [
        ("_set_device", lambda i: _C._set_device(i)),
        ("_synchronize", lambda i: _C._synchronize(i)),
        ("_device_properties", lambda i: _C._device_properties(i)),
        ("_memory_stats", lambda i: _C._memory_stats(i)),
        ("_get_default_generator", lambda i: _C._get_default_generator(i)),
        ("_set_memory_capacity", lambda i: _C._set_memory_capacity(i, 1 << 20)),
    ]
)
def test_invalid_device_index_in_runtime(_name, call):
    with pytest.raises(RuntimeError, match="Invalid npu device index"):
        call(_bad_index())


@parameterized.expand(
    [
        ("cpu_device", "cpu", ValueError),
        ("cuda_device", torch.device("cuda", 0), ValueError),
        ("float", 1.5, TypeError),
        ("bool", True, TypeError),
        ("list", [0], TypeError),
    ]
)
def test_wrong_kind_of_device(_name, value, error):
    with pytest.raises(error):
        torch.npu.set_device(value)


def test_negative_index_in_set_device_is_noop():
    before = torch.npu.current_device()
    torch.npu.set_device(-1)
    assert torch.npu.current_device() == before


def test_set_device_without_index_is_an_error():
    with pytest.raises(ValueError, match="specified index"):
        torch.npu.set_device("npu")


def test_bad_rng_state():
    with pytest.raises(TypeError, match="ByteTensor"):
        torch.npu.set_rng_state(torch.zeros(4))
    with pytest.raises(RuntimeError):
        torch.npu.set_rng_state(torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(ValueError, match="one per npu device"):
        torch.npu.set_rng_state_all([])


def test_bad_memory_capacity():
    with pytest.raises((RuntimeError, TypeError)):
        _C._set_memory_capacity(0, -1)


def test_unsupported_autocast_dtype_factory():
    with pytest.raises(ValueError, match="supported: torch.float16, torch.bfloat16"):
        torch.npu.amp.autocast(dtype=torch.int32)


def test_missing_attribute_is_attribute_error():
    assert not hasattr(torch.npu, "no_such_function")
    with pytest.raises(AttributeError):
        torch.npu.no_such_function


def test_record_stream_of_another_device(two_devices):
    x = torch.ones(4, device="npu:1")
    with pytest.raises(RuntimeError, match="record_stream"):
        x.record_stream(torch.npu.Stream(device=0))


def test_pinned_npu_tensor_is_an_error():
    with pytest.raises(RuntimeError, match="pinned"):
        torch.empty(2, device="npu", pin_memory=True)


def test_compressed_sparse_layout_is_an_error():
    with pytest.raises(NotImplementedError, match="compressed sparse layouts"):
        torch.empty(2, 2, device="npu", layout=torch.sparse_csr)
    with pytest.raises(NotImplementedError, match="compressed sparse layouts"):
        torch.eye(3, device="npu").to_sparse_csr()
