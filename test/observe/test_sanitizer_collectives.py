"""The stream sanitizer on the hccl backend's collectives, under torchrun on 2 processes:
each collective runs on its device's collective stream, ordered after the caller's
stream when issued; the caller's stream is ordered after it once the work is waited for."""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "distributed"))

from launcher import torchrun  # noqa: E402


def test_collectives_are_checked_on_their_stream_and_profiled():
    launch = torchrun(os.path.join(HERE, "workers", "sanitized_collectives.py"), timeout=240)
    assert launch.returncode == 0, launch.explain()
    for rank in (0, 1):
        r = launch.result(rank)
        assert r["sync"] == {"value": 3.0, "error": None}
        assert r["waited"] is None
        race = {"kind": "UnsynchronizedAccessError", "previous": "hccl:all_reduce",
                "previous_stream": f"npu:{rank} collective stream (hccl)"}
        assert r["read_before_wait"] == {**race, "current": "aten::sum"}
        assert r["write_before_wait"] == {**race, "current": "aten::fill_"}
        assert r["unordered_input"]["current"] == "hccl:broadcast"
        assert r["unordered_input"]["previous"] == "aten::add_"
        assert r["unordered_gather_input"]["current"] == "hccl:all_gather_into_tensor"
        assert r["unordered_gather_input"]["previous"] == "aten::add_"
        assert r["input_write_before_wait"] == {
            "kind": "UnsynchronizedAccessError", "current": "aten::fill_",
            "previous": "hccl:all_gather_into_tensor", "previous_stream": f"npu:{rank} collective stream (hccl)"}
        assert r["gathered"] == 32.0  # the gather of the ones ran once the race was reported
        assert r["profiled"] == [["hccl:all_reduce", 0x7FFF0000]]


def test_stock_ddp_comm_hook_and_fsdp2_training_report_nothing():
    # DDP's reducer and comm hooks wait through the work's Future (wait(), then()): the
    # Future orders the waiting stream after the collective. FSDP2 frees reduce-scatter
    # outputs (the gradients) in zero_grad() on the default stream, and its reduce-scatter
    # stream waits for the current stream before allocating again: no race.
    launch = torchrun(os.path.join(HERE, "workers", "sanitized_training.py"), timeout=240,
                      env={"TORCH_NPU_SANITIZER": "1", "TORCH_NPU_MEMORY_CAPACITY_MB": "1024"})
    assert launch.returncode == 0, launch.explain()
    for rank in (0, 1):
        r = launch.result(rank)
        assert set(r) == {"ddp", "ddp_allreduce_hook", "fsdp2", "fsdp2_mixed", "future_then"}, sorted(r)
        for case, seen in r.items():
            if case == "future_then":
                continue
            assert seen == {"errors": [], "equal": True}, (case, seen["errors"][:1])
        # Waiting for the Future orders the stream; reading before it does not.
        assert r["future_then"] == {"waited": None, "then": None, "not_waited": "UnsynchronizedAccessError",
                                    "then_value": 3.0}
