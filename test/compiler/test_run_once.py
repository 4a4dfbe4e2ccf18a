"""The run-once guard of the compile trigger: waiting, recording, retry, re-entry, fork."""
from __future__ import annotations

import os
import threading
import time

import pytest

from torch_npu._startup.compile_trigger import _RunOnce


def test_concurrent_first_callers_wait_for_one_run():
    guard = _RunOnce()
    calls = []
    started = threading.Event()

    def slow_step():
        started.set()
        time.sleep(0.05)
        calls.append("slow")

    finished_before_step_done = []

    def caller():
        guard.run(("slow",), lambda name: slow_step)
        finished_before_step_done.append(calls == [])

    threads = [threading.Thread(target=caller) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == ["slow"]
    assert finished_before_step_done == [False] * 8  # nobody returned before the run ended
    assert guard.done == ["slow"] and guard.runs == {"slow": 1}


def test_failed_step_raises_and_is_retried_without_rerunning_successes():
    guard = _RunOnce()
    calls = []
    attempts = {"flaky": 0}

    def ok():
        calls.append("ok")

    def flaky():
        attempts["flaky"] += 1
        if attempts["flaky"] == 1:
            raise RuntimeError("first attempt fails")
        calls.append("flaky")

    steps = {"ok": ok, "flaky": flaky, "last": lambda: calls.append("last")}
    with pytest.raises(RuntimeError, match="first attempt fails"):
        guard.run(("ok", "flaky", "last"), steps.__getitem__)
    assert guard.done == ["ok"] and "flaky" in guard.failed
    guard.run(("ok", "flaky", "last"), steps.__getitem__)
    assert calls == ["ok", "flaky", "last"]
    assert guard.failed == {} and guard.runs == {"ok": 1, "flaky": 2, "last": 1}


def test_reentry_from_a_step_skips_the_step_in_progress():
    guard = _RunOnce()
    calls = []

    def outer():
        calls.append("outer")
        guard.run(("outer", "inner"), steps.__getitem__)  # e.g. a backend lookup

    steps = {"outer": outer, "inner": lambda: calls.append("inner")}
    guard.run(("outer", "inner"), steps.__getitem__)
    assert calls == ["outer", "inner"]
    assert guard.done == ["inner", "outer"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_can_run_setup_while_parent_thread_holds_the_guard():
    guard = _RunOnce()
    entered, release = threading.Event(), threading.Event()

    def blocking():
        entered.set()
        release.wait(5)

    holder = threading.Thread(target=guard.run, args=(("blocking",), lambda name: blocking))
    holder.start()
    entered.wait(5)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: the holder thread does not exist here
        os.close(read)
        guard.after_fork_in_child()
        guard.run(("blocking", "other"), lambda name: (lambda: None))
        os.write(write, ",".join(guard.done).encode())
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    child_done = os.read(read, 100).decode()
    os.close(read)
    release.set()
    holder.join()
    assert status == 0
    assert child_done == "blocking,other"
    assert guard.done == ["blocking"]
