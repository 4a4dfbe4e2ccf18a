"""Per-device memory accounting of the caching allocator, and out-of-memory behaviour."""
from __future__ import annotations

import gc

import pytest
import torch

MB = 1 << 20


def test_allocation_grows_and_shrinks():
    torch.npu.synchronize()
    before = torch.npu.memory_allocated()
    x = torch.empty(4 * MB, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_allocated() >= before + 4 * MB
    assert torch.npu.memory_reserved() >= torch.npu.memory_allocated()
    del x
    assert torch.npu.memory_allocated() == before


def test_peak_and_reset():
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    x = torch.empty(8 * MB, dtype=torch.uint8, device="npu")
    del x
    assert torch.npu.max_memory_allocated() >= base + 8 * MB
    assert torch.npu.max_memory_reserved() >= base + 8 * MB
    torch.npu.reset_peak_memory_stats()
    assert torch.npu.max_memory_allocated() == torch.npu.memory_allocated()


def test_empty_cache_releases_reserved():
    # Larger than any free block of the segments other tests' live tensors keep, so it gets
    # a segment of its own, which empty_cache can release.
    x = torch.empty(96 * MB, dtype=torch.uint8, device="npu")
    del x
    cached = torch.npu.memory_reserved()
    assert cached >= 96 * MB
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() <= cached - 96 * MB
    assert torch.npu.memory_reserved() >= torch.npu.memory_allocated()


def test_cache_reuses_blocks():
    x = torch.empty(2 * MB, dtype=torch.uint8, device="npu")
    ptr = x.data_ptr()
    del x
    y = torch.empty(2 * MB, dtype=torch.uint8, device="npu")
    assert y.data_ptr() == ptr


def test_memory_stats_and_mem_get_info():
    stats = torch.npu.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.npu.memory_allocated()
    assert stats["reserved_bytes.all.peak"] >= stats["reserved_bytes.all.current"]
    free, total = torch.npu.mem_get_info()
    assert total == torch.npu.get_device_properties().total_memory
    assert free == total - torch.npu.memory_reserved()


def test_accounting_is_per_device(two_devices):
    before0 = torch.npu.memory_allocated(0)
    before1 = torch.npu.memory_allocated(1)
    x = torch.empty(3 * MB, dtype=torch.uint8, device="npu:1")
    assert torch.npu.memory_allocated(1) >= before1 + 3 * MB
    assert torch.npu.memory_allocated(0) == before0
    y = x.to("npu:0")
    assert torch.npu.memory_allocated(0) >= before0 + 3 * MB
    del x, y


@pytest.fixture
def small_capacity():
    import torch_npu._C as _C

    _, total = torch.npu.mem_get_info(0)
    gc.collect()
    torch.npu.empty_cache()
    # 64 MiB usable on top of what tensors still alive elsewhere in the process keep reserved.
    held = torch.npu.memory_reserved(0)
    _C._set_memory_capacity(0, held + 64 * MB)
    yield 64 * MB
    torch.npu.empty_cache()
    _C._set_memory_capacity(0, total)


def test_out_of_memory_raises_and_recovers(small_capacity):
    ooms_before = torch.npu.memory_stats(0)["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(small_capacity * 2, dtype=torch.uint8, device="npu:0")
    message = str(info.value)
    assert "npu:0" in message or "npu 0" in message or "device 0" in message
    assert "MiB" in message or "bytes" in message or "GiB" in message
    assert torch.npu.memory_stats(0)["num_ooms"] == ooms_before + 1
    # The process keeps working, and memory up to the capacity is still usable.
    x = torch.ones(small_capacity // 4, dtype=torch.uint8, device="npu:0")
    # (max, not sum: a uint8 sum accumulates in an int64 copy 8x the size)
    assert x.max().item() == 1
    del x
    gc.collect()


def test_out_of_memory_frees_cache_first(small_capacity):
    # Cached, unoccupied blocks are released before giving up: b does not fit beside a's
    # cached segment, so that segment goes back to the host and the allocation is retried.
    def stats():
        return torch.npu.memory_stats(0)

    reserved_before = torch.npu.memory_reserved(0)
    a = torch.empty(small_capacity // 2, dtype=torch.uint8, device="npu:0")
    del a
    cached = stats()
    assert torch.npu.memory_reserved(0) == reserved_before + small_capacity // 2  # kept as cache
    b = torch.empty(small_capacity * 3 // 4, dtype=torch.uint8, device="npu:0")
    after = stats()
    assert after["num_alloc_retries"] == cached["num_alloc_retries"] + 1
    assert after["num_ooms"] == cached["num_ooms"]
    assert after["segment.all.freed"] == cached["segment.all.freed"] + 1
    assert after["reserved_bytes.all.freed"] == cached["reserved_bytes.all.freed"] + small_capacity // 2
    assert torch.npu.memory_reserved(0) == reserved_before + small_capacity * 3 // 4
    del b


def test_out_of_memory_is_a_runtime_error_subclass(small_capacity):
    with pytest.raises(RuntimeError):
        torch.empty(small_capacity + MB, dtype=torch.uint8, device="npu:0")


def test_allocation_entry_point_of_compiled_code(two_devices):
    """``torch.npu._empty_strided(size, stride, dtype, index)``: the tensor ``torch.empty_strided``
    makes on that npu device, from the same caching allocator (counted in its statistics)."""
    _, npu1 = two_devices
    before = torch.npu.memory_allocated(npu1)
    t = torch.npu._empty_strided((4, 3, 5), (15, 1, 3), torch.float16, npu1.index)
    reference = torch.empty_strided((4, 3, 5), (15, 1, 3), dtype=torch.float16, device=npu1)
    assert (t.device, t.shape, t.stride(), t.dtype) == (npu1, reference.shape, reference.stride(), reference.dtype)
    assert torch.npu.memory_allocated(npu1) >= before + 2 * t.untyped_storage().nbytes()
    assert torch.npu.current_device() == 0
    with pytest.raises(RuntimeError, match="Invalid npu device index 99"):
        torch.npu._empty_strided((1,), (1,), torch.float32, 99)
    with pytest.raises(TypeError, match="size and stride are tuples of ints"):
        torch.npu._empty_strided((1,), (1,), "float32", 0)


def test_churn_of_splits_and_merges_keeps_blocks_and_stats_consistent():
    # Thousands of allocations and frees of mixed sizes split and merge cached blocks over
    # and over (recycling the allocator's block and set-node memory): every live tensor must
    # keep its own bytes, and the stats must match what the snapshot shows.
    gen = torch.Generator().manual_seed(0)
    sizes = [1, 7, 128, 513, 4096, 65536, 600_000, 3 * MB]
    live: dict[int, tuple[torch.Tensor, float]] = {}
    base_allocated = torch.npu.memory_allocated()
    for step in range(3000):
        if live and torch.rand(1, generator=gen).item() < 0.45:
            keys = list(live)
            del live[keys[int(torch.randint(len(keys), (1,), generator=gen))]]
            continue
        n = sizes[int(torch.randint(len(sizes), (1,), generator=gen))]
        t = torch.empty(n, dtype=torch.uint8, device="npu")
        t.fill_(step % 251)
        live[step] = (t, step % 251)
        del t
    for t, value in live.values():
        assert bool((t.cpu() == value).all())
    del t
    starts = sorted((t.data_ptr(), t.data_ptr() + t.numel()) for t, _ in live.values())
    assert all(end <= nxt for (_, end), (nxt, _) in zip(starts, starts[1:])), "live tensors overlap"
    stats = torch.npu.memory_stats()
    device = torch.npu.current_device()
    snapshot = [s for s in torch.npu.memory_snapshot() if s["device"] == device]
    assert stats["allocated_bytes.all.current"] == torch.npu.memory_allocated()
    assert sum(s["allocated_size"] for s in snapshot) == torch.npu.memory_allocated()
    assert sum(s["total_size"] for s in snapshot) == torch.npu.memory_reserved()
    assert stats["active.all.current"] == sum(b["state"] == "active_allocated" for s in snapshot for b in s["blocks"])
    # Free pages of expandable segments are never "inactive split" (they can be released).
    split_segments = [s for s in snapshot if len(s["blocks"]) > 1 and not s["is_expandable"]]
    inactive_split = sum(b["state"] == "inactive" for s in split_segments for b in s["blocks"])
    assert stats["inactive_split.all.current"] == inactive_split
    live.clear()
    assert torch.npu.memory_allocated() == base_allocated
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() == sum(s["total_size"] for s in torch.npu.memory_snapshot() if s["device"] == device)
