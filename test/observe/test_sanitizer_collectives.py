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
