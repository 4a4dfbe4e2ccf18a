"""The caching allocator's statistics follow CUDA's caching allocator, on scripted patterns.

Each scenario runs in a fresh interpreter (the allocator settings are read once, at
device initialisation, and exact numbers need an allocator no other test has touched)
and prints the statistics it saw; the expectations are worked out from the rules of
CUDA's allocator (c10/cuda/CUDACachingAllocator.cpp): 512-byte rounding, 2 MiB small
segments for requests <= 1 MiB, 20 MiB segments for requests < 10 MiB, larger requests
rounded to 2 MiB, split when the rest is >= 512 B (small) or > 1 MiB (large), oversize
blocks (>= max_split_size) never split nor given to smaller requests, and a failed
segment allocation retried after freeing the cache.
"""
from __future__ import annotations

import functools
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fresh_interpreter import run_python  # noqa: E402

MiB = 1 << 20

_PRELUDE = """
import json, torch, torch_npu
MiB = 1 << 20
torch.npu.init()
torch.npu.empty_cache()
def alloc(nbytes):
    return torch.empty(nbytes, dtype=torch.uint8, device="npu:0")
KEYS = ["allocated_bytes.all.current", "reserved_bytes.all.current", "active_bytes.all.current",
        "active.all.current", "allocation.all.current", "segment.all.current", "segment.small_pool.current",
        "segment.large_pool.current", "inactive_split.all.current", "inactive_split_bytes.all.current",
        "requested_bytes.all.current", "num_alloc_retries", "num_ooms", "oversize_allocations.current",
        "oversize_segments.current", "num_sync_all_streams", "num_device_alloc", "num_device_free"]
base = {k: torch.npu.memory_stats(0).get(k, 0) for k in KEYS}
seen = {}
def snap(name):
    s = torch.npu.memory_stats(0)
    seen[name] = {k: s.get(k, 0) - base[k] for k in KEYS}
"""


def _run(body: str, env: dict[str, str] | None = None) -> dict[str, dict[str, int]]:
    out = run_python(_PRELUDE + body + "\nprint('STATS' + json.dumps(seen))\n", env=env, timeout=300)
    line = next(line for line in out.splitlines() if line.startswith("STATS"))
    return json.loads(line[len("STATS"):])


def test_default_allocator_patterns():
    s = _run(
        """
x = alloc(1)
snap("small_one_byte")
del x
snap("small_freed")
a = alloc(5 * MiB)
snap("large_first")
b = alloc(5 * MiB)
snap("large_second")
del a
snap("large_first_freed")
torch.npu.empty_cache()
snap("large_split_not_released")
del b
snap("large_all_freed")
torch.npu.empty_cache()
snap("large_released")
c = alloc(13 * MiB)
snap("own_segment")
del c
torch.npu.empty_cache()
import torch_npu._C as _C
_, total = torch.npu.mem_get_info(0)
_C._set_memory_capacity(0, 64 * MiB)
d = alloc(30 * MiB)
del d
e = alloc(40 * MiB)
snap("retry_after_freeing_cache")
try:
    f = alloc(30 * MiB)
except torch.OutOfMemoryError as exc:
    seen["oom_message"] = {"text": str(exc)}
snap("oom")
del e
torch.npu.empty_cache()
torch.npu.set_per_process_memory_fraction(0.5, 0)
g = alloc(30 * MiB)
try:
    h = alloc(4 * MiB)
except torch.OutOfMemoryError as exc:
    seen["fraction_message"] = {"text": str(exc)}
seen["fraction"] = {"value": torch.npu.get_per_process_memory_fraction(0)}
"""
    )
    # 1 byte: rounded to 512, from a new 2 MiB small segment whose rest is an inactive split block.
    one = s["small_one_byte"]
    assert one["allocated_bytes.all.current"] == 512
    assert one["requested_bytes.all.current"] == 1
    assert one["reserved_bytes.all.current"] == 2 * MiB
    assert one["segment.small_pool.current"] == 1 and one["segment.large_pool.current"] == 0
    assert one["inactive_split.all.current"] == 1
    assert one["inactive_split_bytes.all.current"] == 2 * MiB - 512
    assert one["active.all.current"] == one["allocation.all.current"] == 1
    freed = s["small_freed"]
    assert freed["allocated_bytes.all.current"] == 0 and freed["reserved_bytes.all.current"] == 2 * MiB
    assert freed["inactive_split.all.current"] == 0 and freed["active_bytes.all.current"] == 0

    # 5 MiB: a 20 MiB large segment, split; the second 5 MiB comes from the rest.
    first = s["large_first"]
    assert first["reserved_bytes.all.current"] - 2 * MiB == 20 * MiB
    assert first["segment.large_pool.current"] == 1
    assert first["inactive_split_bytes.all.current"] == 15 * MiB
    second = s["large_second"]
    assert second["reserved_bytes.all.current"] == first["reserved_bytes.all.current"]
    assert second["segment.large_pool.current"] == 1
    assert second["inactive_split.all.current"] == 1
    assert second["inactive_split_bytes.all.current"] == 10 * MiB
    assert second["allocated_bytes.all.current"] == 10 * MiB
    # Freeing the first leaves a second inactive split block; the split segment stays.
    gap = s["large_first_freed"]
    assert gap["inactive_split.all.current"] == 2
    assert gap["inactive_split_bytes.all.current"] == 15 * MiB
    kept = s["large_split_not_released"]
    assert kept["segment.large_pool.current"] == 1
    assert kept["reserved_bytes.all.current"] == 20 * MiB  # the small segment went, the split one stayed
    merged = s["large_all_freed"]
    assert merged["inactive_split.all.current"] == 0 and merged["inactive_split_bytes.all.current"] == 0
    assert s["large_released"]["reserved_bytes.all.current"] == 0
    assert s["large_released"]["num_sync_all_streams"] == 2  # one per empty_cache()

    # >= 10 MiB: its own segment, rounded up to 2 MiB; the 1 MiB left is not worth a split.
    own = s["own_segment"]
    assert own["reserved_bytes.all.current"] == 14 * MiB
    assert own["allocated_bytes.all.current"] == 14 * MiB
    assert own["inactive_split.all.current"] == 0

    # 64 MiB device: 30 MiB cached + 40 MiB does not fit; the cache is freed and the
    # segment allocation retried once. Then 40 + 30 cannot fit at all: an OOM after a retry.
    retry = s["retry_after_freeing_cache"]
    assert retry["num_alloc_retries"] == 1
    assert retry["reserved_bytes.all.current"] == 40 * MiB
    oom = s["oom"]
    assert oom["num_ooms"] == 1 and oom["num_alloc_retries"] == 2
    message = s["oom_message"]["text"]
    assert "Tried to allocate 30.00 MiB" in message and "npu:0" in message
    assert "total capacity of 64.00 MiB" in message and "expandable_segments" in message

    # set_per_process_memory_fraction(0.5): 32 MiB of 64 MiB allowed, enforced per segment.
    assert s["fraction"]["value"] == 0.5
    assert "32.00 MiB allowed" in s["fraction_message"]["text"]


def test_max_split_size_makes_oversize_blocks():
    s = _run(
        """
a = alloc(50 * MiB)
snap("oversize")
del a
b = alloc(30 * MiB)
snap("smaller_request_gets_new_segment")
del b
c = alloc(45 * MiB)
snap("oversize_request_reuses_cached_oversize")
seen["settings"] = {"max_split_size": torch.npu.memory_stats(0)["max_split_size"]}
del c
torch.npu.empty_cache()
base = {k: torch.npu.memory_stats(0).get(k, 0) for k in KEYS}
r = alloc(1200 * 1024 * 1024 // 1000)  # a 1.2 MiB request
snap("rounded")
""",
        # roundup_power2_divisions: 4 divisions in the 1-2 MiB bucket, none above.
        env={"PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:40,roundup_power2_divisions:[1:4,>:1]"},
    )
    assert s["settings"]["max_split_size"] == 40 * MiB
    over = s["oversize"]
    assert over["oversize_allocations.current"] == 1 and over["oversize_segments.current"] == 1
    # A cached oversize block is never handed to a request below max_split_size.
    smaller = s["smaller_request_gets_new_segment"]
    assert smaller["reserved_bytes.all.current"] == 80 * MiB
    assert smaller["oversize_allocations.current"] == 0
    # An oversize request takes a cached oversize block less than 20 MiB larger, unsplit.
    reuse = s["oversize_request_reuses_cached_oversize"]
    assert reuse["reserved_bytes.all.current"] == 80 * MiB
    assert reuse["allocated_bytes.all.current"] == 50 * MiB
    assert reuse["requested_bytes.all.current"] == 45 * MiB
    assert reuse["oversize_allocations.current"] == 1
    # Four divisions between 1 MiB and 2 MiB: the request is rounded up to 1.25 MiB.
    assert s["rounded"]["allocated_bytes.all.current"] == 1280 * 1024


_RECLAIM = """
a = alloc(5 * MiB)
b = alloc(25 * MiB)
snap("packed")
del a, b
torch.npu.empty_cache()
c = alloc(50 * MiB)
del c
d = alloc(8 * MiB)
torch.npu.empty_cache()
snap("reclaim")
"""


def test_expandable_segments_pack_and_reclaim():
    plain = _plain_run()
    expandable = _run(_RECLAIM, env={"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"})
    # Without: 5 MiB in a 20 MiB segment and 25 MiB in its own 26 MiB one. With: one
    # segment per stream grows by 20 MiB pages, so both fit in two pages.
    assert plain["packed"]["reserved_bytes.all.current"] == 46 * MiB
    assert plain["packed"]["segment.all.current"] == 2
    assert expandable["packed"]["reserved_bytes.all.current"] == 40 * MiB
    # A small request carved from a freed big block: the split segment cannot be released
    # without expandable segments; with them, its free whole pages are unmapped.
    assert plain["reclaim"]["allocated_bytes.all.current"] == 8 * MiB
    assert plain["reclaim"]["reserved_bytes.all.current"] == 50 * MiB
    assert plain["reclaim"]["inactive_split_bytes.all.current"] == 42 * MiB
    assert expandable["reclaim"]["allocated_bytes.all.current"] == 8 * MiB
    assert expandable["reclaim"]["reserved_bytes.all.current"] == 20 * MiB
    assert expandable["reclaim"]["inactive_split.all.current"] == 0  # never counted for expandable segments
    assert expandable["reclaim"]["num_device_free"] >= 1  # an unmap


_CLEANUP = """
del d
torch.npu.empty_cache()
"""

@functools.lru_cache(maxsize=None)
def _plain_run() -> dict[str, dict[str, int]]:
    """Both scenarios without settings, in one interpreter."""
    return _run(_RECLAIM + _CLEANUP + _GC)


_GC = """
base = {k: torch.npu.memory_stats(0).get(k, 0) for k in KEYS}
import torch_npu._C as _C
_C._set_memory_capacity(0, 100 * MiB)
torch.npu.set_per_process_memory_fraction(1.0, 0)
a = alloc(30 * MiB)
del a
b = alloc(40 * MiB)
del b
c = alloc(50 * MiB)
snap("after")
"""


def test_garbage_collection_threshold_frees_oldest_cache_before_the_limit():
    without = _plain_run()
    with_gc = _run(_GC, env={"PYTORCH_NPU_ALLOC_CONF": "garbage_collection_threshold:0.5"})
    # Without: 30 + 40 cached + 50 > 100 MiB fails, the whole cache is freed and retried.
    assert without["after"]["num_alloc_retries"] == 1
    assert without["after"]["reserved_bytes.all.current"] == 50 * MiB
    # With: reserved 70 MiB > 50% of the limit, so the oldest cached block (30 MiB) is
    # freed first and the allocation fits without a retry; the newer 40 MiB stays cached.
    assert with_gc["after"]["num_alloc_retries"] == 0
    assert with_gc["after"]["reserved_bytes.all.current"] == 90 * MiB


def test_bad_alloc_conf_is_a_clear_error_at_init():
    out = run_python(
        """
import torch, torch_npu
for call in (lambda: torch.ones(1, device="npu"), torch.npu.init):
    try:
        call()
    except RuntimeError as exc:
        print("ERR", str(exc).splitlines()[0])
    else:
        print("NO ERROR")
""",
        env={"PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:100,foo:1"},
    )
    lines = [line for line in out.splitlines() if line.startswith(("ERR", "NO ERROR"))]
    assert len(lines) == 2 and all(line.startswith("ERR") for line in lines)
    assert "unrecognized key 'foo'" in lines[0] and "PYTORCH_NPU_ALLOC_CONF" in lines[0]
    assert "expandable_segments" in lines[0]  # the message lists the keys there are


def test_alloc_conf_values_are_checked():
    import torch
    import torch_npu  # noqa: F401

    errors = {}
    for conf in ("max_split_size_mb:10", "garbage_collection_threshold:1.5", "expandable_segments:maybe",
                 "roundup_power2_divisions:3", "backend:cudaMallocAsync", "max_split_size_mb"):
        try:
            torch.npu.memory._set_allocator_settings(conf)
        except RuntimeError as exc:
            errors[conf] = str(exc).splitlines()[0]
    assert len(errors) == 6, errors
    assert "must be > 20" in errors["max_split_size_mb:10"]
    assert "(0.0, 1.0)" in errors["garbage_collection_threshold:1.5"]
    assert "True or False" in errors["expandable_segments:maybe"]
    assert "powers of 2" in errors["roundup_power2_divisions:3"]
    assert "native" in errors["backend:cudaMallocAsync"]
    try:
        torch.npu.memory._set_allocator_settings("expandable_segments:True,page_size:1g")
        settings = torch.npu.memory._snapshot()["allocator_settings"]
        assert settings["expandable_segments"] is True
        assert settings["PYTORCH_NPU_ALLOC_CONF"] == "expandable_segments:True,page_size:1g"
    finally:
        torch.npu.memory._set_allocator_settings("")
    assert torch.npu.memory._snapshot()["allocator_settings"]["expandable_segments"] is False


# Expandable segments on a 256 MiB card, checked against CUDA's rules: pages are 20 MiB
# (kLargeBuffer), empty_cache() and the OOM retry unmap only the pages that no live block
# touches, and the address space of a segment is 1 1/8 of the card (15 pages here), so a
# request may map new pages after the last one while free pages before stay unmapped.
_PAGE = 20 * MiB
_CARD = {"TORCH_NPU_MEMORY_CAPACITY_MB": "256"}
_EXPANDABLE_CARD = {**_CARD, "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}

_EVERY_OTHER_FREED = """
ts = [alloc(BLOCK * MiB) for _ in range(COUNT)]
base_address = ts[0].data_ptr()
for i in range(0, COUNT, 2):
    ts[i] = None
def pages_touched():
    pages = set()
    for t in ts:
        if t is not None:
            first = (t.data_ptr() - base_address) // (20 * MiB)
            last = (t.data_ptr() + t.numel() - 1 - base_address) // (20 * MiB)
            pages.update(range(first, last + 1))
    return len(pages)
"""


def _every_other_freed(block_mib: int, count: int, then: str, env: dict[str, str]) -> dict:
    body = _EVERY_OTHER_FREED.replace("BLOCK", str(block_mib)).replace("COUNT", str(count))
    return _run(body + then, env=env)


def test_expandable_segments_empty_cache_unmaps_every_free_page():
    s = _every_other_freed(30, 8, """
snap("freed")
torch.npu.empty_cache()
snap("emptied")
seen["pages"] = {"touched": pages_touched()}
""", _EXPANDABLE_CARD)
    # Freeing keeps the pages; empty_cache() unmaps the 4 whole pages inside the holes.
    assert s["freed"]["reserved_bytes.all.current"] == 240 * MiB
    assert s["emptied"]["allocated_bytes.all.current"] == 120 * MiB
    assert s["pages"]["touched"] == 8
    assert s["emptied"]["reserved_bytes.all.current"] == s["pages"]["touched"] * _PAGE


def test_expandable_segments_oom_retry_unmaps_then_maps_after_the_last_page():
    s = _every_other_freed(30, 8, """
x = alloc(60 * MiB)
snap("after")
seen["placed"] = {"offset": x.data_ptr() - base_address}
""", _EXPANDABLE_CARD)
    # 16 MiB unmapped room: the retry unmaps the 4 free pages, then maps 3 new ones
    # right after the 12 mapped so far, in the same segment's address space.
    assert s["after"]["num_alloc_retries"] == 1
    assert s["after"]["reserved_bytes.all.current"] == 240 * MiB - 4 * _PAGE + 3 * _PAGE
    assert s["placed"]["offset"] == 12 * _PAGE


_ISSUE_REQUEST = """
torch.npu.empty_cache()
snap("emptied")
seen["pages"] = {"touched": pages_touched()}
try:
    alloc(100 * MiB)
    seen["request"] = {"oom": 0}
except torch.OutOfMemoryError:
    seen["request"] = {"oom": 1}
snap("after")
"""


def test_expandable_segments_keep_pages_a_live_block_touches_as_cuda_does():
    # 16 MiB holes never hold a whole 20 MiB page: CUDA keeps all 12 pages mapped and a
    # 100 MiB request cannot get 5 new pages out of the 16 MiB left, so it fails there
    # too, where ordinary segments (one 16 MiB segment per block) give the holes back.
    expandable = _every_other_freed(16, 14, _ISSUE_REQUEST, _EXPANDABLE_CARD)
    plain = _every_other_freed(16, 14, _ISSUE_REQUEST, _CARD)
    assert expandable["emptied"]["allocated_bytes.all.current"] == 112 * MiB
    assert expandable["pages"]["touched"] == 12
    assert expandable["emptied"]["reserved_bytes.all.current"] == 12 * _PAGE
    assert expandable["request"]["oom"] == 1
    assert plain["emptied"]["reserved_bytes.all.current"] == 112 * MiB
    assert plain["request"]["oom"] == 0
    assert plain["after"]["reserved_bytes.all.current"] == 212 * MiB
