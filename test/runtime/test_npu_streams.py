"""Streams and events: the torch.cuda-style classes over torch.Stream/torch.Event,
current/default stream bookkeeping, the stream context, timing and cross-stream waits."""
from __future__ import annotations

import pytest
import torch


def test_stream_is_a_torch_stream():
    s = torch.npu.Stream()
    assert isinstance(s, torch.Stream) and isinstance(s, torch.npu.Stream)
    assert s.device == torch.device("npu", torch.npu.current_device())
    assert s != torch.npu.default_stream()
    assert s.query()
    s.synchronize()


def test_stream_priority_and_device(two_devices):
    s = torch.npu.Stream(device="npu:1", priority=-1)
    assert s.device == torch.device("npu", 1)
    s0 = torch.npu.Stream(device=0, priority=0)
    assert s0.device.index == 0


def test_default_and_current_stream():
    d = torch.npu.default_stream()
    assert d.stream_id == 0 and isinstance(d, torch.npu.Stream)
    assert torch.npu.current_stream() == d
    s = torch.npu.Stream()
    torch.npu.set_stream(s)
    assert torch.npu.current_stream() == s
    assert torch.accelerator.current_stream() == s
    torch.npu.set_stream(d)
    assert torch.npu.current_stream() == d


def test_stream_context_sets_and_restores():
    s = torch.npu.Stream()
    before = torch.npu.current_stream()
    with torch.npu.stream(s) as entered:
        assert entered == s
        assert torch.npu.current_stream() == s
        y = torch.ones(4, device="npu") * 3
    assert torch.npu.current_stream() == before
    assert y.sum().item() == 12


def test_stream_context_none_is_noop():
    before = torch.npu.current_stream()
    with torch.npu.stream(None):
        assert torch.npu.current_stream() == before
    assert torch.npu.current_stream() == before


def test_stream_context_other_device_restores_both(two_devices):
    s1 = torch.npu.Stream(device=1)
    prev0 = torch.npu.current_stream(0)
    prev1 = torch.npu.current_stream(1)
    with torch.npu.stream(s1):
        assert torch.npu.current_stream(1) == s1
        assert torch.npu.current_device() == 1
        assert torch.ones(1, device="npu").device.index == 1
    assert torch.npu.current_stream(0) == prev0
    assert torch.npu.current_stream(1) == prev1
    assert torch.npu.current_device() == 0


def test_set_stream_makes_its_device_current(two_devices):
    s1 = torch.npu.Stream(device=1)
    torch.npu.set_stream(s1)
    assert torch.npu.current_device() == 1
    assert torch.npu.current_stream() == s1
    assert torch.npu.current_stream(0) == torch.npu.default_stream(0)
    torch.npu.set_stream(torch.npu.default_stream(0))
    assert torch.npu.current_device() == 0
    assert torch.npu.current_stream(1) == s1


def test_event_record_query_synchronize_elapsed():
    start = torch.npu.Event(enable_timing=True)
    end = torch.npu.Event(enable_timing=True)
    assert isinstance(start, torch.Event)
    start.record()
    x = torch.randn(256, 256, device="npu")
    for _ in range(3):
        x = x @ x.t() / 256
    end.record()
    end.synchronize()
    assert end.query()
    elapsed = start.elapsed_time(end)
    assert isinstance(elapsed, float) and elapsed >= 0.0


def test_event_on_stream_and_waits():
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        a = torch.ones(100, device="npu") * 2
        ev = s1.record_event()
    assert isinstance(ev, torch.npu.Event)
    s2.wait_event(ev)
    s2.wait_stream(s1)
    with torch.npu.stream(s2):
        b = a + 1
    ev2 = torch.npu.Event()
    ev2.record(s2)
    ev2.wait()  # current stream waits for s2
    torch.npu.synchronize()
    assert b.sum().item() == 300


def test_generic_torch_event_and_stream_apis():
    s = torch.Stream(device="npu")
    e = torch.Event(device="npu", enable_timing=True)
    s.record_event(e)
    s.wait_event(e)
    e.synchronize()
    assert e.query() and s.query()


def _reuse_after_side_stream_use(record: bool):
    """Use a fresh block on a side stream, free it (recording the side stream or not), then
    allocate the same size on the current stream: whether that gets the same memory, and
    what the stream sanitizer (which follows the ordering, not the host's timing) reports."""
    import torch.npu._sanitizer as san

    side = torch.npu.Stream()
    san.enable_npu_sanitizer()
    try:
        x = torch.empty(1024, device="npu")
        address = x.data_ptr()
        side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(side):
            x.add_(1)
        if record:
            x.record_stream(side)
        del x
        try:
            y = torch.zeros(1024, device="npu")  # written on the current stream
            reused = y.data_ptr() == address
            san.check()
        except san.NPUSanitizerErrors as error:
            return None, [type(e).__name__ for e in error.errors]
        return reused, []
    finally:
        torch.npu.synchronize()
        san.disable_npu_sanitizer()


def test_record_stream():
    # CUDA's allocator holds a block recorded on another stream until that stream's work
    # queued before the free is done. Here the host has run that work before it frees
    # anything, so the block is free (and handed out again) at once, and correct: the
    # sanitizer, which checks the ordering the program establishes, accepts the reuse.
    s = torch.npu.Stream()
    torch.npu.synchronize()
    baseline = torch.npu.memory_allocated()
    active_blocks = torch.npu.memory_stats().get("active.all.current", 0)
    x = torch.empty(1024, device="npu")
    with torch.npu.stream(s):
        x.add_(1)
    x.record_stream(s)
    del x
    assert torch.npu.memory_allocated() == baseline
    assert torch.npu.memory_stats().get("active.all.current", 0) == active_blocks

    assert _reuse_after_side_stream_use(record=True) == (True, [])
    # Without record_stream the same program is a race on hardware, and is reported.
    assert _reuse_after_side_stream_use(record=False) == (None, ["FreedWhileInUseError"])


def test_record_stream_rejects_what_is_not_an_npu_stream():
    x = torch.ones(4, device="npu")
    with pytest.raises(RuntimeError, match="record_stream expects an npu stream, got one of cpu"):
        x.record_stream(torch.Stream(device="cpu"))
    with pytest.raises((TypeError, RuntimeError)):  # refused by the binding's argument parser
        x.record_stream("not a stream")


def test_elapsed_time_needs_timing():
    a, b = torch.npu.Event(), torch.npu.Event()
    a.record()
    b.record()
    with pytest.raises(RuntimeError):
        a.elapsed_time(b)


def test_event_of_another_device_is_an_error(two_devices):
    e = torch.npu.Event()
    e.record(torch.npu.Stream(device=0))
    with pytest.raises(RuntimeError, match="device"):
        e.record(torch.npu.Stream(device=1))
    torch.ones(1, device="npu").add_(1)


def test_stream_api_rejects_non_npu_streams():
    cpu_stream = torch.Stream(device="cpu")
    with pytest.raises(ValueError, match="npu stream"):
        torch.npu.set_stream(cpu_stream)
    with pytest.raises(ValueError, match="npu stream"):
        torch.npu.stream(cpu_stream)
    with pytest.raises(TypeError):
        torch.npu.stream("npu:0")
    with pytest.raises(TypeError):
        torch.npu.Stream().wait_event("not an event")


def _ordered_by(device: int, sync) -> bool:
    """Whether ``sync()`` orders work queued on a side stream of ``device`` before later work
    on that device's current stream, as the stream sanitizer sees it (every kernel has run
    by then on this host, so only the ordering can tell a synchronize that waited for the
    device from one that did not)."""
    import torch.npu._sanitizer as san

    side = torch.npu.Stream(device=device)
    san.enable_npu_sanitizer()
    try:
        with torch.npu.device(device):
            x = torch.zeros(8, device="npu")
            side.wait_stream(torch.npu.current_stream())
            with torch.npu.stream(side):
                x.add_(1)
        sync()
        try:
            with torch.npu.device(device):
                x.sum()  # read on the device's current stream
            san.check()
        except san.NPUSanitizerErrors as error:
            assert [type(e).__name__ for e in error.errors] == ["UnsynchronizedAccessError"]
            return False
        return True
    finally:
        torch.npu.synchronize(device)
        san.disable_npu_sanitizer()


def test_synchronize_forms(two_devices):
    # Each spelling waits for every stream of the device it names, and only that device,
    # and leaves the current device as it was.
    torch.npu.set_device(0)
    assert not _ordered_by(0, lambda: None) and not _ordered_by(1, lambda: None)  # the check can fail
    named_device = {
        None: 0, 0: 0, 1: 1, "npu": 0, "npu:0": 0, "npu:1": 1,
        torch.device("npu"): 0, torch.device("npu", 0): 0, torch.device("npu", 1): 1,
    }
    for form, device in named_device.items():
        def sync():
            torch.npu.synchronize() if form is None else torch.npu.synchronize(form)

        assert [_ordered_by(d, sync) for d in (0, 1)] == [d == device for d in (0, 1)], form
        assert torch.npu.current_device() == 0
    # Without an index, the current device is meant.
    torch.npu.set_device(1)
    for form in (None, "npu", torch.device("npu")):
        def sync():
            torch.npu.synchronize() if form is None else torch.npu.synchronize(form)

        assert [_ordered_by(d, sync) for d in (0, 1)] == [False, True], form
        assert torch.npu.current_device() == 1


def test_synchronize_rejects_what_names_no_npu_device(two_devices):
    count = torch.npu.device_count()
    for index in (count, f"npu:{count}", torch.device("npu", count)):
        with pytest.raises(RuntimeError, match=f"Invalid npu device index {count} .*valid indices are 0..{count - 1}"):
            torch.npu.synchronize(index)
    for other in ("cpu", torch.device("cpu"), "cuda:0"):
        with pytest.raises(ValueError, match="Expected a npu device, but got: c"):
            torch.npu.synchronize(other)
    for wrong_type in (True, 1.0):
        with pytest.raises(TypeError, match="Expected a npu device"):
            torch.npu.synchronize(wrong_type)


def test_mixed_npu_and_generic_events_and_streams():
    generic_stream = torch.Stream(device="npu")
    npu_stream = torch.npu.Stream()
    generic_event = torch.Event(device="npu", enable_timing=True)
    npu_event = torch.npu.Event(enable_timing=True)
    npu_event.record(generic_stream)
    generic_event.record(npu_stream)
    generic_stream.wait_event(npu_event)
    generic_stream.wait_stream(npu_stream)
    npu_stream.record_event(generic_event)
    generic_event.synchronize()
    assert isinstance(npu_event.elapsed_time(generic_event), float)
