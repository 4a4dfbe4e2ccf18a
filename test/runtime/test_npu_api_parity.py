"""Every public ``torch.npu`` name of the Ascend package exists here, and each one either
works like its ``torch.cuda`` twin, or is a documented no-op, or raises a clear error.

The list (``torch_npu_2.13_npu_all.txt``, the Ascend package's ``torch.npu.__all__``) is
walked whole: a name missing from the three groups below fails the test, so a new name
in the reference cannot slip through unclassified.
"""
from __future__ import annotations

import gc

import os
import warnings

import pytest
import torch

import torch_npu._C as _C

MiB = 1 << 20
_REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_npu_2.13_npu_all.txt")


def reference_names() -> list[str]:
    with open(_REFERENCE) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


# Names that work as on CUDA (or as on the Ascend card); tested here or in the other runtime tests.
IMPLEMENTED = {
    "is_initialized", "init", "synchronize", "device_count", "can_device_access_peer", "set_device",
    "current_device", "get_device_name", "get_device_properties", "get_device_capability", "mem_get_info",
    "is_available", "device", "device_of", "StreamContext", "stream", "set_stream", "current_stream",
    "default_stream", "set_sync_debug_mode", "get_sync_debug_mode", "manual_seed", "manual_seed_all", "seed",
    "seed_all", "initial_seed", "caching_allocator_alloc", "caching_allocator_delete",
    "get_per_process_memory_fraction", "set_per_process_memory_fraction", "empty_cache", "empty_virt_addr_cache",
    "memory_stats", "memory_stats_as_nested_dict", "reset_accumulated_memory_stats", "reset_peak_memory_stats",
    "reset_max_memory_allocated", "reset_max_memory_cached", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "memory_cached", "max_memory_cached", "memory_snapshot",
    "memory_summary", "MemPool", "use_mem_pool", "get_allocator_backend", "Stream", "Event", "get_rng_state",
    "set_rng_state", "get_rng_state_all", "set_rng_state_all", "get_amp_supported_dtype", "is_autocast_enabled",
    "is_bf16_supported", "set_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype",
    "BoolStorage", "ByteStorage", "ShortStorage", "LongStorage", "IntStorage", "HalfStorage", "CharStorage",
    "DoubleStorage", "FloatStorage", "BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor", "FloatTensor",
    "HalfTensor", "IntTensor", "LongTensor", "ShortTensor", "BFloat16Tensor", "BFloat16Storage",
    "enable_deterministic_with_backward", "disable_deterministic_with_backward", "set_deterministic_level",
    "mstx", "SyncLaunchStream", "ExternalEvent", "graph_task_group_begin", "graph_task_group_end",
    "graph_task_update_begin", "graph_task_update_end", "NPUGraph", "graph", "graph_pool_handle", "is_current_stream_capturing",
    "make_graphed_callables", "ipc_collect", "host_empty_cache", "host_memory_stats",
    "host_memory_stats_as_nested_dict", "reset_accumulated_host_memory_stats", "reset_peak_host_memory_stats",
}
# Accepted and remembered, or answered as a healthy idle card would; documented as having no effect.
NO_OP = {
    "set_task_queue_enable", "get_task_queue_enable", "utilization", "set_option", "CubeMathType", "set_aoe",
    "set_compile_mode", "set_mm_bmm_format_nd", "get_mm_bmm_format_nd", "get_npu_overflow_flag",
    "clear_npu_overflow_flag", "stress_detect", "is_jit_compile_false", "check_uce_in_memory", "config", "matmul",
    "conv", "set_device_limit", "get_device_limit", "set_stream_limit", "reset_stream_limit", "get_stream_limit",
    "set_op_timeout_ms", "use_compatible_impl", "are_compatible_impl_enabled", "super_kernel_scope_begin",
    "super_kernel_scope_end",
}
# Need a physical card or its driver: raise a RuntimeError saying so (and what to do instead).
RAISES = {
    "set_dump": ("acl.json",), "init_dump": (), "finalize_dump": (), "NPUPluggableAllocator": ("x.so", "a", "f"),
    "change_current_allocator": (None,), "current_blas_handle": (), "stop_device": (0,), "restart_device": (0,),
    "ExternalStream": (0,),
    "obfuscation_initialize": (1024, 0, 1), "obfuscation_finalize": (3,), "obfuscation_calculate": (3, None, None), "NpuGraphOpHandler": (),
    "register_npu_graph_handler": (None,),
}
MODULE_OF_RAISING_ATTRIBUTES = {"npurt"}


def test_every_reference_name_exists_and_is_classified():
    names = reference_names()
    assert len(names) > 100
    missing = [n for n in names if not hasattr(torch.npu, n)]
    assert not missing, f"torch.npu lacks {missing}"
    classified = IMPLEMENTED | NO_OP | set(RAISES) | MODULE_OF_RAISING_ATTRIBUTES
    assert not set(names) - classified, f"unclassified: {sorted(set(names) - classified)}"
    assert not (IMPLEMENTED & NO_OP) and not (IMPLEMENTED & set(RAISES)) and not (NO_OP & set(RAISES))
    # torch.npu.__all__ lists them (star-imports get them); listing must not load graphs.
    assert set(names) <= set(torch.npu.__all__), set(names) - set(torch.npu.__all__)


@pytest.mark.parametrize("name", sorted(RAISES))
def test_hardware_only_names_raise_clearly(name):
    with pytest.raises(RuntimeError, match="simulated NPU"):
        getattr(torch.npu, name)(*RAISES[name])


def test_npurt_module_raises_on_use():
    import torch_npu.npu.npurt as npurt

    assert torch.npu.npurt is npurt
    with pytest.raises(AttributeError, match="Ascend runtime C API"):
        npurt.aclrtGetDevice()


def test_no_op_configuration_is_accepted_validated_and_remembered(tmp_path):
    torch.npu.set_compile_mode(jit_compile=False)
    assert torch.npu.is_jit_compile_false()
    torch.npu.set_compile_mode(jit_compile=True)
    assert not torch.npu.is_jit_compile_false()
    torch.npu.set_option({"ACL_OP_SELECT_IMPL_MODE": "high_precision"})
    with pytest.raises(TypeError, match="dict"):
        torch.npu.set_option(["x"])
    with pytest.raises(TypeError, match="str"):
        torch.npu.set_option({"ACL_PRECISION_MODE": 1})
    torch.npu.set_aoe(str(tmp_path / "aoe"))
    assert (tmp_path / "aoe").is_dir()
    torch.npu.set_mm_bmm_format_nd(False)
    assert torch.npu.get_mm_bmm_format_nd() is False
    torch.npu.set_mm_bmm_format_nd(True)
    torch.npu.config.allow_internal_format = True
    assert torch.npu.config.allow_internal_format is True
    torch.npu.config.allow_internal_format = False
    torch.npu.matmul.allow_hf32 = True
    torch.npu.conv.allow_hf32 = False
    assert torch.npu.matmul.allow_hf32 and not torch.npu.conv.allow_hf32
    torch.npu.matmul.allow_hf32 = False
    torch.npu.conv.allow_hf32 = True
    with pytest.raises(AttributeError, match="allow_hf32"):
        torch.npu.matmul.allow_tf32 = True
    with pytest.raises(TypeError):
        torch.npu.matmul.allow_hf32 = "yes"
    assert torch.npu.CubeMathType.USE_HF32 == 3
    torch.npu.set_task_queue_enable(False)
    assert torch.npu.get_task_queue_enable() == 0
    torch.npu.set_task_queue_enable(True)
    torch.npu.set_op_timeout_ms(1000)
    with pytest.raises(ValueError):
        torch.npu.set_op_timeout_ms(-1)
    props = torch.npu.get_device_properties(0)
    assert torch.npu.get_device_limit(0) == {"cube_core_num": props.cube_core_num, "vector_core_num": props.vector_core_num}
    torch.npu.set_device_limit(0, cube_num=4)
    assert torch.npu.get_device_limit(0)["cube_core_num"] == 4
    s = torch.npu.Stream()
    torch.npu.set_stream_limit(s, vector_num=2)
    assert torch.npu.get_stream_limit(s) == {"cube_core_num": 4, "vector_core_num": 2}
    torch.npu.reset_stream_limit(s)
    assert torch.npu.get_stream_limit(s)["vector_core_num"] == props.vector_core_num
    torch.npu.set_device_limit(0, cube_num=props.cube_core_num)
    torch.npu.use_compatible_impl(True)
    assert torch.npu.are_compatible_impl_enabled()
    torch.npu.use_compatible_impl(False)
    # Health checks answer as a healthy idle card.
    assert torch.npu.stress_detect() == 0
    assert torch.npu.check_uce_in_memory(0) == 0
    assert torch.npu.utilization() == 0
    assert torch.npu.get_npu_overflow_flag() is False
    torch.npu.clear_npu_overflow_flag()
    torch.npu.super_kernel_scope_begin()
    torch.npu.super_kernel_scope_end()
    # The numbers stay the cpu numbers whatever was set.
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    torch.npu.matmul.allow_hf32 = True
    try:
        assert torch.equal((a.npu() @ b.npu()).cpu(), a @ b)
    finally:
        torch.npu.matmul.allow_hf32 = False


def test_legacy_typed_tensors_and_storages():
    x = torch.npu.FloatTensor(2, 3)
    assert x.shape == (2, 3) and x.dtype == torch.float32 and x.is_npu
    y = torch.npu.LongTensor([1, 2, 3])
    assert y.dtype == torch.int64 and y.cpu().tolist() == [1, 2, 3]
    assert torch.npu.HalfTensor().numel() == 0 and torch.npu.HalfTensor().dtype == torch.float16
    assert isinstance(x, torch.npu.FloatTensor) and not isinstance(x, torch.npu.DoubleTensor)
    assert not isinstance(torch.ones(1), torch.npu.FloatTensor)
    assert torch.npu.BFloat16Tensor(torch.Size([4])).dtype == torch.bfloat16
    assert x.type() == "torch.npu.FloatTensor"
    with pytest.raises(TypeError, match="FloatTensor"):
        torch.npu.FloatTensor(torch.ones(2, dtype=torch.float64, device="npu"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        storage = torch.npu.FloatStorage(5)
        assert storage.device.type == "npu" and storage.dtype == torch.float32 and storage.size() == 5
        assert isinstance(storage, torch.npu.FloatStorage) and not isinstance(storage, torch.npu.IntStorage)
        assert isinstance(torch.ones(3).npu().storage(), torch.npu.FloatStorage)
        t = torch.npu.FloatTensor(storage)
        assert t.device.type == "npu" and t.numel() == 5
        for name in ("Bool", "Byte", "Char", "Short", "Int", "Long", "Half", "Double", "BFloat16"):
            assert getattr(torch.npu, f"{name}Storage")(2).device.type == "npu"


def test_sync_debug_mode_warns_and_raises_on_host_syncs():
    x = torch.ones(4, device="npu")
    assert torch.npu.get_sync_debug_mode() == 0
    try:
        torch.npu.set_sync_debug_mode("warn")
        assert torch.npu.get_sync_debug_mode() == 1
        with pytest.warns(UserWarning, match="synchronizing NPU operation"):
            x.sum().item()
        with pytest.warns(UserWarning, match="synchronizing NPU operation"):
            x.cpu()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y = x * 2 + 1  # no host sync, no warning
        torch.npu.set_sync_debug_mode(2)
        with pytest.raises(RuntimeError, match="synchronizing NPU operation"):
            y.sum().item()
        with pytest.raises(RuntimeError, match="synchronizing NPU operation"):
            torch.npu.synchronize()
    finally:
        torch.npu.set_sync_debug_mode("default")
    assert y.sum().item() == 12.0
    with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
        torch.npu.set_sync_debug_mode("loud")


def test_device_capability_forwards_to_the_runtime():
    cap = torch.accelerator.get_device_capability("npu:0")
    dtypes = cap["supported_dtypes"]
    assert {torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.complex64} <= dtypes
    assert torch.qint8 not in dtypes
    for dtype in dtypes:  # every dtype reported can be allocated and converted on npu
        t = torch.zeros(3, dtype=dtype, device="npu")
        assert t.cpu().dtype == dtype
    assert torch.accelerator.get_device_capability(1 if torch.npu.device_count() > 1 else 0) == cap
    if not os.environ.get("TORCH_NPU_DEVICE_MODEL"):  # the generic device (cards: test_npu_device_model.py)
        assert torch.npu.get_device_name() == "Simulated Ascend NPU"
        assert torch.npu.get_device_capability() == (1, 0)
    assert torch.npu.is_bf16_supported()
    assert "dav-c220" in torch.npu.get_arch_list() and "dav-m200" in torch.npu.get_arch_list()


def test_raw_allocations_fraction_and_peer_access():
    before = torch.npu.memory_allocated(0)
    ptr = torch.npu.caching_allocator_alloc(3 * MiB, device=0, stream=torch.npu.current_stream(0))
    assert torch.npu.memory_allocated(0) == before + 3 * MiB
    torch.npu.caching_allocator_delete(ptr)
    assert torch.npu.memory_allocated(0) == before
    with pytest.raises(RuntimeError, match="not the start of a live npu allocation"):
        torch.npu.caching_allocator_delete(ptr)
    with pytest.raises(TypeError, match="stream"):
        torch.npu.caching_allocator_alloc(10, stream="s")
    assert torch.npu.get_per_process_memory_fraction(0) == 1.0
    with pytest.raises(ValueError, match="fraction"):
        torch.npu.set_per_process_memory_fraction(1.5)
    with pytest.raises(TypeError):
        torch.npu.set_per_process_memory_fraction(1)
    if torch.npu.device_count() > 1:
        assert torch.npu.can_device_access_peer(0, 1) and not torch.npu.can_device_access_peer(0, 0)
    with pytest.raises(RuntimeError, match="Invalid npu device index"):
        torch.npu.can_device_access_peer(0, 99)
    torch.npu.ipc_collect()
    assert torch.npu.get_allocator_backend() == "native"


def test_host_memory_stats_count_cached_pinned_blocks():
    torch.npu.host_empty_cache()
    torch.npu.reset_accumulated_host_memory_stats()
    base = torch.npu.host_memory_stats()
    x = torch.empty(3000, dtype=torch.uint8).pin_memory()
    s = torch.npu.host_memory_stats()
    assert s["active_requests.current"] == base["active_requests.current"] + 1
    assert s["active_bytes.current"] == base["active_bytes.current"] + 4096  # rounded to a power of two
    assert s["num_host_alloc"] == 1
    del x
    y = torch.empty(4000, dtype=torch.uint8).pin_memory()  # reuses the cached 4 KiB block
    s = torch.npu.host_memory_stats()
    assert s["num_host_alloc"] == 1 and y.is_pinned()
    del y
    torch.npu.host_empty_cache()
    s = torch.npu.host_memory_stats()
    assert s["num_host_free"] == 1 and s["allocations.current"] == base["allocations.current"]
    assert set(torch.npu.host_memory_stats_as_nested_dict()) >= {
        "allocations", "allocated_bytes", "active_requests", "active_bytes", "host_alloc_time", "host_free_time"}
    torch.npu.reset_peak_host_memory_stats()


def test_memory_stats_keys_match_cuda_and_summary_prints():
    torch.ones(10, device="npu")
    stats = torch.npu.memory_stats()
    for metric in ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
                   "active_bytes", "inactive_split_bytes", "requested_bytes"):
        for pool in ("all", "large_pool", "small_pool"):
            for kind in ("current", "peak", "allocated", "freed"):
                assert f"{metric}.{pool}.{kind}" in stats
    for key in ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free",
                "max_split_size", "oversize_allocations.current", "oversize_segments.peak"):
        assert key in stats
    nested = torch.npu.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == stats["allocated_bytes.all.current"]
    assert list(stats) == sorted(stats)
    # torch.accelerator reads the same allocator (c10::DeviceAllocator). Earlier tests'
    # tensors can be freed between two readings (a garbage-collected cycle, autograd's
    # device thread dropping a finished graph task), so compare readings taken while the
    # count holds still; `kept` makes it non-zero.
    kept = torch.ones(10, device="npu")
    gc.collect()

    def steady_pair(read_a, read_b):
        for _ in range(50):
            a, b = read_a(0), read_b(0)
            if read_a(0) == a:
                return a, b
        raise AssertionError("npu memory counters never held still for two readings")

    allocated = steady_pair(torch.accelerator.memory_allocated, torch.npu.memory_allocated)
    assert allocated[0] == allocated[1] >= kept.untyped_storage().nbytes()
    reserved = steady_pair(torch.accelerator.memory_reserved, torch.npu.memory_reserved)
    assert reserved[0] == reserved[1]
    summary = torch.npu.memory_summary()
    assert "PyTorch NPU memory summary" in summary and "Allocated memory" in summary
    assert "Oversize allocations" in summary
    with pytest.warns(FutureWarning):
        assert torch.npu.memory_cached() == torch.npu.memory_reserved()
    with pytest.warns(FutureWarning):
        assert torch.npu.max_memory_cached() == torch.npu.max_memory_reserved()
    with pytest.warns(FutureWarning):
        torch.npu.reset_max_memory_cached()
    torch.npu.reset_accumulated_memory_stats()
    assert torch.npu.memory_stats()["allocation.all.allocated"] == 0
    assert _C._allocator_initialized()


def test_mempool_keeps_its_memory_apart():
    pool = torch.npu.MemPool()
    assert pool.use_count() == 1
    with torch.npu.use_mem_pool(pool):
        x = torch.empty(4 * MiB, dtype=torch.uint8, device="npu")
    y = torch.empty(4 * MiB, dtype=torch.uint8, device="npu")
    stats = torch.npu.memory_stats()
    key = f"reserved_bytes_by_private_pools.{pool.id[0]}_{pool.id[1]}.all.current"
    assert stats[key] == 20 * MiB
    ptr = x.data_ptr()
    del x
    with torch.npu.use_mem_pool(pool):
        z = torch.empty(4 * MiB, dtype=torch.uint8, device="npu")
    assert z.data_ptr() == ptr  # cached in the pool, reused from it
    assert y.data_ptr() != ptr
    reserved = torch.npu.memory_reserved()
    del z, pool  # the pool is gone and its last block freed: its memory goes back
    assert torch.npu.memory_reserved() == reserved - 20 * MiB
    with pytest.raises(TypeError):
        with torch.npu.use_mem_pool(object()):
            pass


def test_deterministic_switches():
    assert not torch.are_deterministic_algorithms_enabled()
    try:
        torch.npu.set_deterministic_level(2)
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.is_deterministic_algorithms_warn_only_enabled()
        torch.npu.set_deterministic_level(1)
        assert torch.is_deterministic_algorithms_warn_only_enabled()
        torch.npu.set_deterministic_level(0)
        assert not torch.are_deterministic_algorithms_enabled()
        x = torch.randn(3, requires_grad=True, device="npu")
        y = torch.npu.enable_deterministic_with_backward(x * 2)
        assert torch.are_deterministic_algorithms_enabled()
        z = torch.npu.disable_deterministic_with_backward(y.sin())
        assert not torch.are_deterministic_algorithms_enabled()
        z.sum().backward()
        assert torch.are_deterministic_algorithms_enabled()  # turned on again where backward passed it
        torch.testing.assert_close(x.grad.cpu(), (2 * torch.cos(2 * x.detach().cpu())))
    finally:
        torch.use_deterministic_algorithms(False)
    with pytest.raises(ValueError):
        torch.npu.set_deterministic_level(3)


def test_mstx_ranges_show_in_profiles():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        range_id = torch.npu.mstx.range_start("forward")
        torch.ones(3, device="npu").sum()
        torch.npu.mstx.range_end(range_id)
        torch.npu.mstx.mark("step")

        @torch.npu.mstx.mstx_range("decorated")
        def work():
            return torch.ones(2) + 1

        work()
    names = {e.name for e in prof.events()}
    assert {"mstx::forward", "mstx::mark::step", "mstx::decorated"} <= names
    with pytest.raises(ValueError, match="no open range"):
        torch.npu.mstx.range_end(123456)


def test_sync_launch_stream_and_autocast_state():
    s = torch.npu.SyncLaunchStream()
    with torch.npu.stream(s):
        out = torch.ones(2, device="npu") + 1
    assert out.cpu().tolist() == [2.0, 2.0]
    assert not torch.npu.is_autocast_enabled()
    torch.npu.set_autocast_enabled(True)
    try:
        assert torch.npu.is_autocast_enabled() and torch.is_autocast_enabled("npu")
        previous = torch.npu.get_autocast_dtype()
        torch.npu.set_autocast_dtype(torch.bfloat16)
        assert torch.get_autocast_dtype("npu") == torch.bfloat16
        torch.npu.set_autocast_dtype(previous)
    finally:
        torch.npu.set_autocast_enabled(False)
