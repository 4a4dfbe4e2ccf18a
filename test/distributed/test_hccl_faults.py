"""Faults on an hccl group of 2 plain processes: mismatched calls, a rank that is late, a rank
that dies before or during a collective, and the report of a run that is stuck. Nothing may
hang: every launch has a hard timeout, and the survivors must raise within the configured one."""
from __future__ import annotations

import re

import pytest

from launcher import spawn_ranks

MISMATCH_WORDS = {
    "numel": "number of elements",
    "dtype": "same dtype",
    "op": "different collectives",
    "root": "same root",
    "reduce_op": "same ReduceOp",
    "split": "split sizes",
}


def _faults(scenario, timeout=90, **env):
    return spawn_ranks("faults.py", scenario, timeout=timeout, env=env)


@pytest.mark.parametrize("board", ["shared", "network"])
def test_mismatched_calls_raise_on_every_rank_without_crashing(board):
    # "network": the ranks exchange signatures over the transport, as ranks on several hosts do.
    launch = _faults("mismatches", TORCH_HCCL_SHARED_BOARD="1" if board == "shared" else "0")
    assert launch.codes == [0, 0], launch.explain()
    for rank in (0, 1):
        for kind, seen in launch.result(rank, "mismatches").items():
            assert seen["raised"] == "DistBackendError", (kind, seen)
            assert MISMATCH_WORDS[kind] in seen["message"], (kind, seen["message"])
            assert seen["seconds"] < 5, (kind, seen["seconds"])  # far inside the 30 s timeout
            assert "no longer usable" in seen["after"], (kind, seen["after"])
            assert seen["default_group_fine"], kind


def test_a_short_receive_buffer_raises_instead_of_crashing():
    # The receive is posted to the transport only once the send's signature is on the board.
    launch = _faults("p2p")
    assert launch.codes == [0, 0], launch.explain()
    why = "rank 0 sent float32[1024] (1024 elements) but rank 1 receives into float32[512] (512 elements)"
    receiver = launch.result(1)
    assert receiver["raised"] == "DistBackendError" and why in receiver["message"]
    # The sender either finished its send or learns why the receiver gave up.
    sender = launch.result(0)
    assert sender["raised"] is None or (sender["raised"] == "DistBackendError" and why in sender["message"])


def test_a_late_rank_is_named_when_the_timeout_expires():
    launch = _faults("late", TEST_TIMEOUT_S="3", TEST_LATE_S="6")
    assert launch.codes == [0, 0], launch.explain()
    waited = launch.result(0)
    assert waited["raised"] == "DistBackendError"
    assert 2.9 <= waited["seconds"] <= 6.0, waited["seconds"]
    msg = waited["message"]
    assert "all_reduce SUM float32[16] (#3 on group" in msg and "rank 1 did not arrive" in msg
    assert "rank 1 (pid" in msg and "has not arrived at #3" in msg
    # Each rank's last collectives, with sequence number, op, dtype and shape.
    assert "#2 broadcast float32[4] root=0" in msg and "#1 all_reduce SUM float32[4]" in msg
    late = launch.result(1)
    assert late["raised"] == "DistBackendError" and "rank 0" in late["message"] and "gave up" in late["message"]
    assert late["seconds"] < 2.0


def test_hccl_exec_timeout_applies_without_an_explicit_timeout():
    launch = _faults("late", TEST_NO_TIMEOUT="1", HCCL_EXEC_TIMEOUT="2", TEST_LATE_S="5")
    assert launch.codes == [0, 0], launch.explain()
    waited = launch.result(0)
    assert waited["raised"] == "DistBackendError" and "timed out after 2.00 s" in waited["message"]
    assert 1.9 <= waited["seconds"] <= 4.5


@pytest.mark.parametrize("scenario,code", [("death", 3), ("death_before", 4)])
def test_a_dead_rank_is_named_quickly(scenario, code):
    launch = _faults(scenario, TEST_TIMEOUT_S="60")
    assert launch.codes == [0, code], launch.explain()
    seen = launch.result(0)
    assert seen["raised"] == "DistBackendError"
    assert seen["seconds"] < 10, seen["seconds"]  # far inside the 60 s timeout
    assert "rank 1 (pid" in seen["message"] and "has exited" in seen["message"]
    assert "it died" in seen["message"].splitlines()[0]  # not "left the group"
    assert "all_reduce SUM float32[" in seen["message"]
    if scenario == "death":
        after = seen["after"]
        assert after["raised"] == "DistBackendError" and "no longer usable" in after["message"]


def test_a_rank_ending_on_an_exception_is_named_as_such():
    launch = _faults("exception", TEST_TIMEOUT_S="60")
    assert launch.codes[0] == 0 and launch.codes[1] == 1, launch.explain()
    seen = launch.result(0)
    assert seen["raised"] == "DistBackendError" and seen["seconds"] < 10, seen
    first = seen["message"].splitlines()[0]
    assert "rank 1 (pid" in first and "exited without destroy_process_group" in first, first
    assert "left the group" not in seen["message"]


def test_ranks_disagreeing_on_the_shared_board_fail_at_once():
    launch = _faults("board_disagreement", TEST_TIMEOUT_S="60", HCCL_CONNECT_TIMEOUT="60")
    assert launch.codes == [0, 0], launch.explain()
    for rank in (0, 1):
        seen = launch.result(rank)
        assert seen["raised"] == "DistBackendError", seen
        assert seen["seconds"] < 15, seen["seconds"]  # not the 60 s connect timeout
        first = seen["message"].splitlines()[0]
        assert "disagree on TORCH_HCCL_SHARED_BOARD" in first and "rank 1: '0'" in first, first


def test_timeout_values_follow_the_environment_unless_given():
    explicit = _faults("timeouts", TEST_TIMEOUT_S="5", HCCL_EXEC_TIMEOUT="7", HCCL_CONNECT_TIMEOUT="9")
    from_env = _faults("timeouts", TEST_NO_TIMEOUT="1", HCCL_EXEC_TIMEOUT="7", HCCL_CONNECT_TIMEOUT="9")
    defaults = _faults("timeouts", TEST_NO_TIMEOUT="1", HCCL_EXEC_TIMEOUT=None, HCCL_CONNECT_TIMEOUT=None)
    for launch in (explicit, from_env, defaults):
        assert launch.codes == [0, 0], launch.explain()
    assert explicit.result(0) == {"exec_s": 5.0, "connect_s": 5.0}
    assert from_env.result(1) == {"exec_s": 7.0, "connect_s": 9.0}
    assert defaults.result(0) == {"exec_s": 1800.0, "connect_s": 120.0}


def test_a_stuck_run_reports_before_the_timeout():
    launch = _faults("dump", TORCH_HCCL_DUMP_AFTER_SEC="1")
    assert launch.codes == [0, 0], launch.explain()
    waited = launch.result(0)
    assert waited["raised"] is None and waited["seconds"] >= 3.5
    printed = launch.stderr.split("--- rank 1 ---")[0]
    assert re.search(r"hccl: rank 0 has waited 1\.\d\d s in all_reduce SUM float32\[16\] \(#3", printed), printed
    assert "rank 1 (pid" in printed and "has not arrived at #3" in printed
    assert "has not arrived at #3" in waited["api_report"]
    status = {r["rank"]: r for r in waited["api_status"]}
    mine = status[0]["entries"][-1]
    assert mine["seq"] == 3 and mine["state"] == "running" and mine["age_s"] >= 1.5 and mine["duration_ms"] is None
    assert status[1]["last_seq"] == 2 and status[1]["entries"][-1]["description"] == "broadcast float32[4] root=0"
