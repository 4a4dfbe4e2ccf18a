"""torch.npu.NPUGraph / torch.npu.graph: capture records, replay runs on static memory.

Every numeric check compares with the same computation on CPU eager.
"""
import gc

import pytest
import torch

from graphs_compare import assert_close_to_cpu


def _capture(fn, *args, **kw):
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, **kw):
        out = fn(*args)
    return g, out


def test_replay_sees_new_input_values():
    def fn(x, w):
        return torch.relu(x @ w + 1).sin() * 2

    x_cpu, w_cpu = torch.randn(8, 16), torch.randn(16, 4)
    static_x, w = x_cpu.npu(), w_cpu.npu()
    g, static_out = _capture(fn, static_x, w)
    for _ in range(3):
        new = torch.randn(8, 16)
        static_x.copy_(new.npu())
        g.replay()
        assert_close_to_cpu(static_out, fn(new, w_cpu))


def test_capture_does_not_run_the_work():
    x = torch.zeros(4, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        x.add_(1)
    assert_close_to_cpu(x, torch.zeros(4))
    g.replay()
    assert_close_to_cpu(x, torch.ones(4))


def test_in_place_update_happens_once_per_replay():
    x = torch.zeros(3, device="npu")
    g, _ = _capture(lambda t: t.mul_(2).add_(1), x)
    for n in range(1, 6):
        g.replay()
        # x_{n} = 2 x_{n-1} + 1 from 0: 2**n - 1
        assert_close_to_cpu(x, torch.full((3,), 2.0**n - 1))


def test_memory_allocated_during_capture_keeps_its_address():
    x = torch.randn(16, device="npu")
    g, out = _capture(lambda t: t * 3, x)
    ptr = out.data_ptr()
    for _ in range(5):
        g.replay()
        assert out.data_ptr() == ptr
    assert_close_to_cpu(out, x.cpu() * 3)


def _replay_and_copy_out(g, out, replays):
    """Cpu copies of ``out`` after each of ``replays`` replays of ``g``."""
    copies = []
    for _ in range(replays):
        g.replay()
        copies.append(out.cpu().clone())
    return copies


def test_random_ops_advance_at_each_replay():
    torch.npu.manual_seed(0)
    g, out = _capture(lambda: torch.rand(1000, device="npu"))
    draws = _replay_and_copy_out(g, out, 3)
    for d in draws:
        assert 0.0 <= d.min() and d.max() < 1.0
        assert 0.4 < d.mean() < 0.6
    assert not torch.equal(draws[0], draws[1])
    assert not torch.equal(draws[1], draws[2])


def test_random_replays_follow_the_generator_seed():
    def run():
        torch.npu.manual_seed(1234)
        g, out = _capture(lambda: torch.randn(64, device="npu"))
        return _replay_and_copy_out(g, out, 2)

    assert all(torch.equal(a, b) for a, b in zip(run(), run()))


@pytest.mark.parametrize(
    "sync",
    [
        pytest.param(lambda t: t.sum().item(), id="item"),
        pytest.param(lambda t: t.cpu(), id="cpu"),
        pytest.param(lambda t: torch.npu.synchronize(), id="synchronize"),
        pytest.param(lambda t: torch.nonzero(t), id="nonzero"),
        pytest.param(lambda t: t[t > 0], id="boolean-mask"),
    ],
)
def test_host_sync_during_capture_raises_and_leaves_no_capture_open(sync):
    x = torch.randn(8, device="npu")
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError):
        with torch.npu.graph(g):
            y = x * 2
            sync(y)
    assert not torch.npu.is_current_stream_capturing()
    # The stream and the device work afterwards, and a new capture succeeds.
    assert_close_to_cpu(x + 1, x.cpu() + 1)
    g2, out = _capture(lambda t: t - 1, x)
    g2.replay()
    assert_close_to_cpu(out, x.cpu() - 1)


def test_is_current_stream_capturing():
    assert not torch.npu.is_current_stream_capturing()
    seen = []
    g = torch.npu.NPUGraph()
    x = torch.ones(2, device="npu")
    with torch.npu.graph(g):
        seen.append(torch.npu.is_current_stream_capturing())
        x.add_(1)
    assert seen == [True]
    assert not torch.npu.is_current_stream_capturing()


def test_graph_uses_the_given_stream():
    s = torch.npu.Stream()
    g = torch.npu.NPUGraph()
    seen = []
    with torch.npu.graph(g, stream=s):
        seen.append(torch.npu.current_stream())
    assert seen[0] == s
    assert torch.npu.current_stream() == torch.npu.default_stream()


def test_capture_error_mode_is_validated():
    g = torch.npu.NPUGraph()
    with pytest.raises(ValueError, match="capture_error_mode"):
        with torch.npu.graph(g, capture_error_mode="nonsense"):
            pass
    assert not torch.npu.is_current_stream_capturing()
    for mode in ("global", "thread_local", "relaxed"):
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g, capture_error_mode=mode):
            pass


def test_shared_pool_between_graphs():
    x = torch.randn(32, device="npu")
    pool = torch.npu.graph_pool_handle()
    g1, y = _capture(lambda t: t * 2, x, pool=pool)
    g2, z = _capture(lambda t: t + 5, y, pool=pool)
    assert g1.pool() == g2.pool() == pool
    g1.replay()
    g2.replay()
    assert_close_to_cpu(z, x.cpu() * 2 + 5)


def test_multi_stream_capture_with_side_stream_and_events():
    x_cpu = torch.randn(64)
    x = x_cpu.npu()
    side = torch.npu.Stream()

    def fn(t):
        a = t * 2
        forked = torch.npu.Event()
        forked.record()
        side.wait_event(forked)
        with torch.npu.stream(side):
            b = a.cos() + 1
            joined = torch.npu.Event()
            joined.record(side)
        c = a.sin()
        torch.npu.current_stream().wait_event(joined)
        return b * c

    def ref(t):
        a = t * 2
        return (a.cos() + 1) * a.sin()

    g, out = _capture(fn, x)
    for _ in range(3):
        new = torch.randn(64)
        x.copy_(new.npu())
        g.replay()
        assert_close_to_cpu(out, ref(new))


def test_capture_on_each_device(two_devices):
    for dev in two_devices:
        with torch.npu.device(dev):
            x_cpu = torch.randn(10)
            x = x_cpu.to(dev)
            g = torch.npu.NPUGraph()
            with torch.npu.graph(g):
                assert torch.npu.current_stream().device == dev
                out = (x * x).exp()
            g.replay()
            assert out.device == dev
            assert_close_to_cpu(out, (x_cpu * x_cpu).exp())


def test_thousand_replays_leave_memory_allocated_unchanged():
    x = torch.randn(128, device="npu")
    g, out = _capture(lambda t: (t.sin() * 2).cos() + t, x)
    g.replay()
    before = torch.npu.memory_allocated()
    for _ in range(1000):
        g.replay()
    assert torch.npu.memory_allocated() == before
    assert_close_to_cpu(out, (x.cpu().sin() * 2).cos() + x.cpu())


def test_reset_returns_the_pool_memory():
    # Garbage left by earlier tests in this process, collected in the middle of the
    # capture, would change the counts the test compares.
    gc.collect()
    x = torch.randn(1 << 16, device="npu")
    torch.npu.empty_cache()
    before_allocated = torch.npu.memory_allocated()
    before_reserved = torch.npu.memory_reserved()
    g, out = _capture(lambda t: t * 2 + 1, x)
    del out
    # As with CUDA graph pools: freed graph memory stays reserved by the graph's pool.
    assert torch.npu.memory_allocated() == before_allocated
    assert torch.npu.memory_reserved() > before_reserved
    g.reset()
    assert torch.npu.memory_allocated() == before_allocated
    assert torch.npu.memory_reserved() == before_reserved
    # A reset graph can capture again.
    with torch.npu.graph(g):
        y = x - 1
    g.replay()
    assert_close_to_cpu(y, x.cpu() - 1)


def test_host_kernel_launch_is_recorded():
    calls = []
    x = torch.zeros(3, device="npu")

    def kernel(t):
        calls.append(1)
        t.add_(1)

    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        torch.npu._launch_host_kernel(kernel, x)
    assert calls == []
    g.replay()
    g.replay()
    assert len(calls) == 2
    assert_close_to_cpu(x, torch.full((3,), 2.0))
