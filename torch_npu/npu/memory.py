"""Memory management of the npu caching allocator, in the shape of ``torch.cuda.memory``.

Every function here has a ``torch.cuda`` twin with the same arguments and result: the
statistics (``memory_stats`` has every key ``torch.cuda.memory_stats`` has, nested the
same way), the summary table, snapshots and memory history (readable by
``torch.cuda._memory_viz``), the per-process memory fraction (enforced), raw
allocations, memory pools, and the pinned host allocator's statistics. The allocator is
configured by ``PYTORCH_NPU_ALLOC_CONF``, with the keys of ``PYTORCH_CUDA_ALLOC_CONF``.
"""
from __future__ import annotations

import collections
import contextlib
import pickle
import sys
import warnings
from typing import Any, Iterator

import torch

import torch_npu._C as _C

from ._utils import _get_device_index

# ``_empty_strided(size, stride, dtype, device_index)``: a new npu tensor from the caching
# allocator, with no argument parsing or dispatch. Compiled code allocates its npu buffers
# through it (Inductor's ``empty_strided_cpu`` for npu). Bound directly: it sits on every
# buffer of every compiled call.
_empty_strided = _C._empty_strided

__all__ = [
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "set_per_process_memory_fraction",
    "get_per_process_memory_fraction",
    "empty_cache",
    "empty_virt_addr_cache",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "memory_cached",
    "max_memory_cached",
    "memory_snapshot",
    "memory_summary",
    "mem_get_info",
    "MemPool",
    "use_mem_pool",
    "get_allocator_backend",
    "NPUPluggableAllocator",
    "change_current_allocator",
    "host_empty_cache",
    "host_memory_stats",
    "host_memory_stats_as_nested_dict",
    "reset_accumulated_host_memory_stats",
    "reset_peak_host_memory_stats",
    "ipc_collect",
]


def _index(device: Any) -> int:
    return _get_device_index(device, optional=True)


def caching_allocator_alloc(size: int, device: Any = None, stream: Any = None) -> int:
    """Allocate ``size`` bytes from the caching allocator; returns the address.

    ``stream`` (an npu stream or a stream id) is the stream the memory is used on
    (default: the device's current stream). Free with :func:`caching_allocator_delete`.
    """
    index = _index(device)
    if stream is None:
        stream = torch.npu.current_stream(index)
    if isinstance(stream, torch.Stream):
        if stream.device.type != "npu" or stream.device_index != index:
            raise ValueError(f"caching_allocator_alloc: stream {stream} is not a stream of npu:{index}")
        stream = stream.stream_id
    if not isinstance(stream, int) or isinstance(stream, bool):
        raise TypeError(
            "Invalid type for stream argument, must be `torch.npu.Stream` or `int` (a stream id), "
            f"got {type(stream).__name__}"
        )
    return _C._caching_allocator_raw_alloc(int(size), index, stream)


def caching_allocator_delete(mem_ptr: int) -> None:
    """Free memory returned by :func:`caching_allocator_alloc`."""
    _C._caching_allocator_raw_delete(int(mem_ptr))


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Limit this process to ``fraction`` of the device memory (enforced: beyond it the
    allocator frees its cache and then raises ``torch.OutOfMemoryError``)."""
    index = _index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(fraction, index)


def get_per_process_memory_fraction(device: Any = None) -> float:
    """The fraction set by :func:`set_per_process_memory_fraction` (1.0 if never set)."""
    return _C._get_memory_fraction(_index(device))


def empty_cache() -> None:
    """Return every cached, unoccupied segment of every device to the host. Blocks split
    off a segment that is still partly in use stay (as on CUDA), except whole free pages
    of expandable segments."""
    _C._empty_cache()


def empty_virt_addr_cache() -> None:
    """Ascend's release of cached virtual address space: the same as :func:`empty_cache`
    here, which already unmaps the free pages of expandable segments."""
    _C._empty_cache()


def _flatten_stats(nested: dict[str, Any]) -> "collections.OrderedDict[str, Any]":
    """Nested statistics as torch.cuda flattens them: keys joined by ``.``, sorted. A tuple
    key (a private pool's id) becomes its parts joined by ``_``."""
    result = []

    def _format_key(key: Any) -> str:
        if isinstance(key, tuple):
            return "_".join(str(part) for part in key)
        return str(key)

    def _add(prefix: str, obj: Any) -> None:
        if isinstance(obj, dict):
            if prefix:
                prefix += "."
            for k, v in obj.items():
                _add(prefix + _format_key(k), v)
        else:
            result.append((prefix, obj))

    _add("", nested)
    result.sort()
    return collections.OrderedDict(result)


def memory_stats_as_nested_dict(device: Any = None) -> dict[str, Any]:
    """The allocator statistics of ``device`` as ``torch.cuda.memory_stats_as_nested_dict``
    gives them (``{}`` before the device is initialised)."""
    if not _C._allocator_initialized():
        return {}
    return _C._memory_stats(_index(device))


def memory_stats(device: Any = None) -> "collections.OrderedDict[str, Any]":
    """The allocator statistics of ``device``, flattened and sorted as ``torch.cuda.memory_stats``.

    Keys: ``{allocation,segment,active,inactive_split,allocated_bytes,reserved_bytes,
    active_bytes,inactive_split_bytes,requested_bytes}.{all,large_pool,small_pool}.
    {current,peak,allocated,freed}``, ``oversize_{allocations,segments}.*``,
    ``num_alloc_retries``, ``num_ooms``, ``num_sync_all_streams``, ``num_device_alloc``,
    ``num_device_free``, ``num_oom_rejections``, ``max_split_size`` and
    ``reserved_bytes_by_private_pools.<pool>.*``.
    """
    return _flatten_stats(memory_stats_as_nested_dict(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    """Reset the ``allocated``/``freed`` counters and the event counters of ``device``."""
    _C._reset_accumulated_memory_stats(_index(device))


def reset_peak_memory_stats(device: Any = None) -> None:
    """Restart every ``peak`` statistic of ``device`` from its current value."""
    _C._reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device: Any = None) -> None:
    """Deprecated alias of :func:`reset_peak_memory_stats` (resets every peak)."""
    warnings.warn(
        "torch.npu.reset_max_memory_allocated now calls torch.npu.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device: Any = None) -> None:
    """Deprecated alias of :func:`reset_peak_memory_stats` (resets every peak)."""
    warnings.warn(
        "torch.npu.reset_max_memory_cached now calls torch.npu.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    reset_peak_memory_stats(device)


def memory_allocated(device: Any = None) -> int:
    """Bytes currently occupied by tensors on ``device`` (rounded block sizes)."""
    return _C._memory_allocated(_index(device))


def max_memory_allocated(device: Any = None) -> int:
    """Peak of :func:`memory_allocated` since start or the last :func:`reset_peak_memory_stats`."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: Any = None) -> int:
    """Bytes held by the caching allocator on ``device`` (segments, allocated or cached)."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: Any = None) -> int:
    """Peak of :func:`memory_reserved` since start or the last :func:`reset_peak_memory_stats`."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def memory_cached(device: Any = None) -> int:
    """Deprecated name of :func:`memory_reserved`."""
    warnings.warn(
        "`torch.npu.memory_cached` has been renamed to `torch.npu.memory_reserved`", FutureWarning, stacklevel=2
    )
    return memory_reserved(device)


def max_memory_cached(device: Any = None) -> int:
    """Deprecated name of :func:`max_memory_reserved`."""
    warnings.warn(
        "`torch.npu.max_memory_cached` has been renamed to `torch.npu.max_memory_reserved`",
        FutureWarning,
        stacklevel=2,
    )
    return max_memory_reserved(device)


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """``(free, total)`` bytes of ``device``: its capacity, and what segments leave of it."""
    return tuple(_C._mem_get_info(_index(device)))


def memory_snapshot(mempool_id: tuple[int, int] | None = None, include_traces: bool = True) -> list[dict]:
    """The segments of every device (``torch.cuda.memory_snapshot``), optionally of one pool."""
    pool = (0, 0, include_traces) if mempool_id is None else (mempool_id[0], mempool_id[1], include_traces)
    return _C._npu_memory_snapshot(pool)["segments"]


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A printable table of the allocator statistics of ``device`` (``torch.cuda.memory_summary``)."""
    device = _index(device)
    stats = memory_stats(device)

    def _format_size(sz: int, pref_sz: float) -> str:
        prefixes = ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"]
        prefix = prefixes[0]
        for new_prefix in prefixes[1:]:
            if pref_sz < 768 * 1024:
                break
            prefix = new_prefix
            sz //= 1024
            pref_sz /= 1024
        return f"{sz:6d} {prefix}"

    def _format_count(cnt: int, pref_cnt: float) -> str:
        prefixes = [" ", "K", "M"]
        prefix = prefixes[0]
        for new_prefix in prefixes[1:]:
            if pref_cnt < 750 * 1000:
                break
            prefix = new_prefix
            cnt //= 1000
            pref_cnt /= 1000
        return f"{cnt:7d} {prefix} "

    metrics = [
        ("allocated_bytes", "Allocated memory", _format_size),
        ("active_bytes", "Active memory", _format_size),
        ("requested_bytes", "Requested memory", _format_size),
        ("reserved_bytes", "NPU reserved memory", _format_size),
        ("inactive_split_bytes", "Non-releasable memory", _format_size),
        ("allocation", "Allocations", _format_count),
        ("active", "Active allocs", _format_count),
        ("segment", "NPU reserved segments", _format_count),
        ("inactive_split", "Non-releasable allocs", _format_count),
    ]
    lines = ["=" * 75, f" {'':16} PyTorch NPU memory summary, device ID {device:<17d} ", "-" * 75]
    lines.append(
        f"  {'':9} NPU OOMs: {stats.get('num_ooms', 0):<13d} | {'':6} segment alloc retries: "
        f"{stats.get('num_alloc_retries', 0):<4d}  "
    )
    lines += ["=" * 75, "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "]
    for key, name, formatter in metrics:
        lines.append("-" * 75)
        submetrics = [("all", name)]
        if not abbreviated:
            submetrics += [("large_pool", "      from large pool"), ("small_pool", "      from small pool")]
        pref = None
        for sub, sub_name in submetrics:
            prefix = f"{key}.{sub}."
            values = [stats.get(prefix + m, 0) for m in ("current", "peak", "allocated", "freed")]
            if pref is None:
                pref = values
            cells = " | ".join(formatter(v, p) for v, p in zip(values, pref))
            lines.append(f" {sub_name:<21} | {cells} ")
    for key, name in (("oversize_allocations", "Oversize allocations"), ("oversize_segments", "Oversize NPU segments")):
        lines.append("-" * 75)
        values = [stats.get(f"{key}.{m}", 0) for m in ("current", "peak", "allocated", "freed")]
        cells = " | ".join(_format_count(v, v) for v in values)
        lines.append(f" {name:<21} | {cells} ")
    lines.append("=" * 75)
    return "|" + "|\n|".join(lines) + "|\n"


# ---- memory history and snapshots ---------------------------------------------------------


def _record_memory_history_legacy(
    enabled: bool,
    record_context: bool = True,
    trace_alloc_max_entries: int = 1,
    trace_alloc_record_context: bool = False,
    device: Any = None,
    record_context_cpp: bool = False,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
) -> None:
    _C._npu_record_memory_history_legacy(
        enabled,
        record_context,
        trace_alloc_max_entries,
        trace_alloc_record_context,
        record_context_cpp,
        clear_history,
        skip_actions or [],
    )


def _record_memory_history(enabled: str | bool | None = "all", *args: Any, **kwargs: Any) -> None:
    """Record stack traces of allocations (and a history of alloc/free events), as
    ``torch.cuda.memory._record_memory_history``; read them with :func:`_snapshot`.

    ``enabled``: ``None`` stops recording (and drops the history), ``"state"`` keeps
    the stack of each live allocation, ``"all"`` also the event history.
    ``context``: ``None``, ``"state"``, ``"alloc"`` or ``"all"`` (stacks of frees too).
    ``stacks``: ``"python"`` or ``"all"`` (C++ frames too). ``max_entries`` bounds the
    history (a ring buffer). ``clear_history`` and ``skip_actions`` as on CUDA;
    ``device``, ``compile_context`` and ``global_record_annotations`` are accepted. The
    pre-2.1 boolean signature (``_record_memory_history(True, ...)``) also works.
    """
    if isinstance(enabled, bool):
        return _record_memory_history_legacy(enabled, *args, **kwargs)
    return _record_memory_history_impl(enabled, *args, **kwargs)


def _record_memory_history_impl(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: Any = None,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
) -> None:
    if device is not None:
        _index(device)
    _C._npu_record_memory_history(
        enabled, context, stacks, min(int(max_entries), sys.maxsize), clear_history, list(skip_actions or [])
    )


def _snapshot(device: Any = None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
    """The allocator state now: ``{"segments", "device_traces", "allocator_settings",
    "external_annotations"}`` in ``torch.cuda.memory._snapshot()``'s format."""
    snapshot = _C._npu_memory_snapshot()
    if augment_with_fx_traces:
        from torch.cuda.memory import _augment_memory_snapshot_stack_traces

        snapshot = _augment_memory_snapshot_stack_traces(snapshot)
    return snapshot


def _dump_snapshot(filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False) -> None:
    """Pickle :func:`_snapshot` to ``filename`` (open it at pytorch.org/memory_viz, or with
    ``python -m torch.cuda._memory_viz``)."""
    snapshot = _snapshot(augment_with_fx_traces=augment_with_fx_traces)
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f)


def _set_allocator_settings(settings: str) -> None:
    """Change the allocator settings at run time (``PYTORCH_NPU_ALLOC_CONF`` syntax)."""
    _C._set_allocator_settings(settings)


def get_allocator_backend() -> str:
    """The allocator backend: always ``"native"`` (the caching allocator)."""
    return "native"


class NPUPluggableAllocator:
    """``torch.cuda.memory.CUDAPluggableAllocator``'s twin. Not available: device memory
    of the simulated NPU is owned by its caching allocator; raises with that reason."""

    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str) -> None:
        raise RuntimeError(
            "NPUPluggableAllocator is not supported by the simulated NPU: its device memory is "
            "host memory owned by the built-in caching allocator. Tune that allocator with "
            "PYTORCH_NPU_ALLOC_CONF, or use torch.npu.MemPool for a private pool."
        )


def change_current_allocator(allocator: Any) -> None:
    """Not available on the simulated NPU (see :class:`NPUPluggableAllocator`); raises."""
    raise RuntimeError(
        "torch.npu.memory.change_current_allocator is not supported by the simulated NPU: the "
        "built-in caching allocator cannot be replaced (see NPUPluggableAllocator)."
    )


class MemPool:
    """A private memory pool, as ``torch.cuda.MemPool``: allocations made inside
    :func:`use_mem_pool` come from it and are cached there, apart from the general cache.
    Its memory returns to the device once the pool is deleted and its last tensor freed."""

    def __init__(self, allocator: Any = None, use_on_oom: bool = False, symmetric: bool = False) -> None:
        if allocator is not None:
            raise RuntimeError("MemPool(allocator=...) needs a pluggable allocator, which the simulated NPU lacks")
        self._id = _C._new_pool_id()
        _C._retain_pool(self._id)
        self._released = False

    @property
    def id(self) -> tuple[int, int]:
        """The pool's id, as the ``segment_pool_id`` of its segments in snapshots."""
        return (0, self._id)

    @property
    def allocator(self) -> None:
        return None

    def use_count(self) -> int:
        """How many owners the pool has (this object, and graphs capturing into it)."""
        return _C._pool_use_count(self._id)

    def snapshot(self, include_traces: bool = True) -> list[dict]:
        """The segments of this pool (``torch.cuda.MemPool.snapshot``)."""
        return memory_snapshot(self.id, include_traces=include_traces)

    def __del__(self) -> None:
        if not getattr(self, "_released", True):
            self._released = True
            try:
                _C._release_pool(self._id)
            except Exception:  # interpreter shutdown
                pass


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device: Any = None) -> Iterator[None]:
    """Within the block, this thread's allocations on ``device`` (default: current) come from ``pool``."""
    if not isinstance(pool, MemPool):
        raise TypeError(f"use_mem_pool expects a torch.npu.MemPool, got {type(pool).__name__}")
    index = _index(device)
    previous = _C._exchange_thread_pool(pool._id, index)
    try:
        yield
    finally:
        _C._exchange_thread_pool(*previous)


# ---- pinned host memory ----------------------------------------------------------------------


def host_empty_cache() -> None:
    """Give the cached, unused pinned host blocks back."""
    _C._host_empty_cache()


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    """Statistics of the pinned host allocator, nested as ``torch.cuda.host_memory_stats_as_nested_dict``."""
    return _C._host_memory_stats()


def host_memory_stats() -> "collections.OrderedDict[str, Any]":
    """Statistics of the pinned host allocator (``torch.cuda.host_memory_stats``): blocks are
    rounded to a power of two and cached; ``allocations``/``allocated_bytes`` count
    active and cached blocks, ``active_requests``/``active_bytes`` the ones handed out."""
    return _flatten_stats(host_memory_stats_as_nested_dict())


def reset_accumulated_host_memory_stats() -> None:
    """Reset the ``allocated``/``freed`` counters of the pinned host allocator."""
    _C._reset_accumulated_host_memory_stats()


def reset_peak_host_memory_stats() -> None:
    """Restart the ``peak`` statistics of the pinned host allocator."""
    _C._reset_peak_host_memory_stats()


def ipc_collect() -> None:
    """Release memory shared with other processes and no longer used there. No npu memory is
    ever shared between processes on the simulator (it lives in this process), so there is
    nothing to collect; kept for ``torch.cuda.ipc_collect`` parity."""
