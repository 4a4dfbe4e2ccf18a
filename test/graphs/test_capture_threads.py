"""NPU graph capture under threads, capture error modes, aborted captures, the capture report.

A capture records the work queued on the capturing stream (and on streams forked from it
with events), whichever thread queues it; every other stream and thread keeps running its
work. Every thread-related test has a hard timeout (joins with timeouts, fresh
interpreters with subprocess timeouts): no test may hang CI.
"""
import gc
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

from graphs_compare import assert_close_to_cpu

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOIN_TIMEOUT_S = 60


def _in_thread(fn):
    """Run ``fn`` on a new thread; return its result or re-raise its exception."""
    box = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(timeout=JOIN_TIMEOUT_S)
    assert not t.is_alive(), "thread did not finish"
    if "error" in box:
        raise box["error"]
    return box["result"]


class _CaptureOpen:
    """Begins a capture on a side stream of this thread and holds it open until close()."""

    def __init__(self, mode="global"):
        self.graph = torch.npu.NPUGraph()
        self.stream = torch.npu.Stream()
        self.mode = mode

    def __enter__(self):
        self.ctx = torch.npu.stream(self.stream)
        self.ctx.__enter__()
        self.graph.capture_begin(capture_error_mode=self.mode)
        return self

    def __exit__(self, *exc):
        try:
            if torch.npu.is_current_stream_capturing():
                self.graph.capture_end()
        finally:
            self.ctx.__exit__(None, None, None)


def test_other_threads_eager_work_runs_during_a_capture():
    x = torch.randn(64, device="npu")
    with _CaptureOpen("thread_local") as cap:
        captured = x * 2
        other = _in_thread(lambda: (torch.ones(64, device="npu") * 3).cpu())
    torch.testing.assert_close(other, torch.full((64,), 3.0))
    cap.graph.replay()
    assert_close_to_cpu(captured, x.cpu() * 2)
    # The other thread's work was not recorded: only the capturing stream's op is there.
    assert cap.graph.num_nodes() == 1


def test_other_threads_memory_does_not_come_from_the_graph_pool():
    torch.npu.empty_cache()
    before = torch.npu.memory_reserved()
    with _CaptureOpen("relaxed") as cap:
        kept = _in_thread(lambda: torch.ones(1 << 16, device="npu"))
    cap.graph.reset()
    del cap
    # The other thread's tensor lives in the ordinary cache, untouched by the graph's reset.
    assert_close_to_cpu(kept, torch.ones(1 << 16))
    del kept
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() == before


@pytest.mark.parametrize("mode,other_thread_may_sync", [("global", False), ("thread_local", True), ("relaxed", True)])
def test_capture_error_mode_decides_for_other_threads_syncs(mode, other_thread_may_sync):
    x = torch.randn(8, device="npu")
    with _CaptureOpen(mode) as cap:
        y = x + 1

        def other():
            return torch.ones(3, device="npu").sum().item()

        if other_thread_may_sync:
            assert _in_thread(other) == 3.0
        else:
            with pytest.raises(RuntimeError, match="capture_error_mode='global'.*thread_local"):
                _in_thread(other)
        # Either way the capture itself goes on.
        assert torch.npu.is_current_stream_capturing()
    cap.graph.replay()
    assert_close_to_cpu(y, x.cpu() + 1)


@pytest.mark.parametrize("mode,may_sync", [("global", False), ("thread_local", False), ("relaxed", True)])
def test_capture_error_mode_decides_for_the_capturing_threads_other_streams(mode, may_sync):
    other_stream = torch.npu.Stream()
    with _CaptureOpen(mode) as cap:
        if may_sync:
            other_stream.synchronize()
        else:
            with pytest.raises(RuntimeError, match=f"capture_error_mode='{mode}'"):
                other_stream.synchronize()
        assert torch.npu.is_current_stream_capturing()
    cap.graph.replay()


def test_host_sync_on_the_captured_stream_aborts_in_every_mode():
    for mode in ("global", "thread_local", "relaxed"):
        g = torch.npu.NPUGraph()
        with pytest.raises(RuntimeError, match="needs the host to wait"):
            with torch.npu.graph(g, capture_error_mode=mode):
                (torch.ones(2, device="npu") * 2).sum().item()
        assert not torch.npu.is_current_stream_capturing()


def test_training_capture_records_the_backward_on_autograd_threads():
    torch.manual_seed(0)
    w_cpu = torch.randn(6, 3)
    w = w_cpu.npu().requires_grad_()
    x = torch.randn(4, 6, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        loss = (x @ w).tanh().sum()
        (grad,) = torch.autograd.grad(loss, w)
    for _ in range(2):
        new = torch.randn(4, 6)
        x.copy_(new.npu())
        g.replay()
        w_ref = w_cpu.clone().requires_grad_()
        (ref,) = torch.autograd.grad((new @ w_ref).tanh().sum(), w_ref)
        assert_close_to_cpu(grad, ref, atol=1e-5, rtol=1e-5)


def test_capture_on_the_default_stream_is_refused():
    g = torch.npu.NPUGraph()
    for device in range(torch.npu.device_count()):
        with torch.npu.device(device):
            # CUDA's message (CUDAGraph::capture_begin), with the device's name.
            with pytest.raises(RuntimeError, match=r"^NPU graphs must be captured on a non-default stream\. "
                               r"\(However, after capture, it's ok to replay them on the default stream\.\)"):
                g.capture_begin()
            assert not torch.npu.is_current_stream_capturing()
    # Nothing was left half open: the default stream runs work at once, and the same graph
    # captures on a side stream and replays on the default one.
    x = torch.arange(4.0, device="npu")
    assert torch.equal((x * 2).cpu(), torch.arange(4.0) * 2)
    with torch.npu.stream(torch.npu.Stream()):
        g.capture_begin()
        y = x * 3
        g.capture_end()
    x.copy_(torch.full((4,), 5.0))
    g.replay()
    assert torch.equal(y.cpu(), torch.full((4,), 15.0))
    # torch.npu.graph given the default stream explicitly: refused, and the stream is restored.
    with pytest.raises(RuntimeError, match="non-default stream"):
        with torch.npu.graph(torch.npu.NPUGraph(), stream=torch.npu.default_stream()):
            pass
    assert torch.npu.current_stream() == torch.npu.default_stream()
    assert not torch.npu.is_current_stream_capturing()


def test_capture_end_of_an_aborted_capture_raises_and_the_pool_does_not_leak():
    x = torch.randn(1 << 18, device="npu")  # 1 MiB: blocks of the graph pool are 2 MiB
    # Graphs of earlier tests that only the cyclic collector frees must not go during the
    # loop below, or the pool count drops for a reason that is not this test's.
    gc.collect()
    torch.npu.empty_cache()
    reserved = torch.npu.memory_reserved()
    stream = torch.npu.Stream()
    for _ in range(5):
        g = torch.npu.NPUGraph()
        with torch.npu.stream(stream):
            g.capture_begin()
            y = x * 2
            with pytest.raises(RuntimeError, match="needs the host to wait"):
                y.sum().item()
            with pytest.raises(RuntimeError, match="capture was aborted"):
                g.capture_end()
        with pytest.raises(RuntimeError, match="aborted"):
            g.replay()
        del y
        g.reset()
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() == reserved


def test_graph_context_raises_when_an_aborted_capture_was_swallowed():
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="capture was aborted"):
        with torch.npu.graph(g):
            try:
                torch.ones(2, device="npu").sum().item()
            except RuntimeError:
                pass
    assert not torch.npu.is_current_stream_capturing()


def test_reset_during_another_threads_replay_does_not_crash():
    x = torch.randn(256, device="npu")
    started = threading.Event()

    def slow_kernel(t):
        started.set()
        for _ in range(200):
            t.mul_(1.0)

    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        torch.npu._launch_host_kernel(slow_kernel, x)
        y = x.sin()
    errors = []

    def replayer():
        try:
            for _ in range(20):
                g.replay()
        except RuntimeError as exc:  # a replay after the reset is refused, not a crash
            errors.append(str(exc))

    t = threading.Thread(target=replayer)
    t.start()
    started.wait(timeout=JOIN_TIMEOUT_S)
    g.reset()
    t.join(timeout=JOIN_TIMEOUT_S)
    assert not t.is_alive()
    assert all("needs a finished capture" in e for e in errors), errors
    del y


def test_capturing_eager_work_imports_no_compiler_module():
    code = textwrap.dedent(
        """
        import sys
        import torch, torch_npu
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.GELU()).npu()
        x = torch.randn(4, 8, device="npu")
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g):
            y = model(x)
            y.sum().backward()
        g.replay()
        print(sorted(m for m in ("torch._dynamo", "torch._inductor", "torch_npu.compiler") if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_capture_report_lists_every_problem_with_its_stack():
    x = torch.randn(16, device="npu")

    def step(t):
        a = t * 2
        n = a.sum().item()  # host sync
        b = a[a > 0]  # dynamic output shape
        c = torch.randn(4).npu()  # a cpu tensor copied to the device
        torch.npu.synchronize()  # host sync
        return a, n, b, c

    report = torch.npu.graphs.capture_report(step, x)
    kinds = [p.kind for p in report.problems]
    assert "dynamic output shape" in kinds, kinds
    assert kinds.count("host sync") >= 3, kinds
    assert not report.capturable
    # Each problem names the line of the step that issued it.
    lines = {p.stack[-1].line for p in report.problems}
    assert "n = a.sum().item()  # host sync" in lines, lines
    assert "torch.npu.synchronize()  # host sync" in lines
    text = str(report)
    assert "would break an NPU graph capture" in text and "item" in text
    # The step really ran: its results are right, and nothing is left capturing.
    a, n, b, c = report.result
    assert_close_to_cpu(a, x.cpu() * 2)
    assert n == pytest.approx((x.cpu() * 2).sum().item(), rel=1e-5)
    assert not torch.npu.is_current_stream_capturing()


def test_capture_report_of_a_capturable_step_is_empty():
    x = torch.randn(16, device="npu")
    report = torch.npu.graphs.capture_report(lambda t: (t.sin() + 1).relu(), x)
    assert report.capturable and report.problems == ()
    assert_close_to_cpu(report.result, (x.cpu().sin() + 1).relu())
