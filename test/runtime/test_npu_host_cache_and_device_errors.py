"""torch.accelerator's host-memory functions reach the npu's pinned-memory allocator, and
a wrong device is refused with the real torch_npu's wording ("Expected a npu device")."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fresh_interpreter import run_python  # noqa: E402


def test_accelerator_empty_host_cache_releases_cached_pinned_memory():
    # In a fresh interpreter: it used to crash the process.
    out = run_python(
        """
        import torch, torch_npu
        torch.accelerator.empty_host_cache()  # before the device's allocator is initialised: a no-op
        torch.ones(1, device="npu")
        pinned = torch.ones(1 << 20, dtype=torch.uint8).pin_memory()
        assert pinned.is_pinned()
        before = torch.npu.host_memory_stats()
        del pinned  # its block stays cached
        torch.accelerator.empty_host_cache()
        after = torch.npu.host_memory_stats()
        torch.accelerator.empty_host_cache()  # nothing cached: a no-op
        print("FREED", after["num_host_free"] - before["num_host_free"],
              before["allocated_bytes.current"], after["allocated_bytes.current"])
        """,
        env={"TORCH_NPU_MEMORY_CAPACITY_MB": "1024"},
        timeout=120,
    )
    freed, held_before, held_after = (int(v) for v in out.split("FREED")[1].split())
    assert freed == 1 and held_before >= 1 << 20 and held_after == 0


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), "cuda:0", torch.device("meta")])
def test_wrong_device_uses_the_real_packages_wording(device):
    expected = f"Expected a npu device, but got: {torch.device(device)}"
    for call in (torch.npu.synchronize, torch.npu.memory_allocated, torch.npu.get_device_properties):
        with pytest.raises(ValueError) as info:
            call(device)
        assert str(info.value) == expected, call


def test_wrong_device_where_cpu_is_allowed():
    from torch_npu.npu._utils import _get_device_index

    assert _get_device_index("cpu", allow_cpu=True) == -1
    with pytest.raises(ValueError, match=r"^Expected a npu or cpu device, but got: meta$"):
        _get_device_index("meta", allow_cpu=True)
