"""The memory-overlap sweep (overlap_sweep.py) over a fixed sample of OpInfo operators:
elementwise, reductions and scans, indexing, matrix products and concatenation, with
in-place and out= variants. npu must raise where cpu raises and equal cpu elsewhere, in
eager mode and when the call is recorded in an NPU graph capture.
The full sweep runs from ``python test/runtime/overlap_sweep.py``."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import overlap_sweep  # noqa: E402

SAMPLE = (
    "add",
    "mul",
    "div.no_rounding_mode",
    "addcmul",
    "clamp",
    "exp",
    "neg",
    "pow",
    "lerp",
    "where",
    "cumsum",
    "mean",
    "index_select",
    "index_add",
    "gather",
    "scatter",
    "masked_fill",
    "tril",
    "mm",
    "addmm",
    "cat",
)


def _ops():
    by_id = {overlap_sweep.op_id(op): op for op in overlap_sweep.overlap_ops()}
    missing = [name for name in SAMPLE if name not in by_id]
    assert not missing, f"not OpInfo ops with an out= or in-place variant any more: {missing}"
    return [by_id[name] for name in SAMPLE]


@pytest.mark.parametrize("op", _ops(), ids=overlap_sweep.op_id)
def test_npu_applies_cpus_overlap_rule(op):
    # Eager npu against cpu, and each case recorded in an NPU graph capture, which must
    # refuse exactly the aliasing cpu refuses.
    samples, outcomes = overlap_sweep.sweep_op(op, max_samples=3, capture=True)
    assert samples > 0
    kinds = {o.kind for o in outcomes}
    assert "none" in kinds and kinds & {"full", "partial", "internal"}, kinds
    bad = [o for o in outcomes if not o.agree]
    assert not bad, "\n".join(f"{o.variant} {o.kind}: cpu={o.cpu} npu={o.npu} {o.reason}" for o in bad)
