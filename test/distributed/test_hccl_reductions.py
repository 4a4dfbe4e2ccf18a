"""Reduction dtypes and coalescing regions of the hccl backend on 2 processes under torchrun:
int16 reductions equal int16 arithmetic on cpu (wrap-around included), uint16/32/64
reductions are refused with a first line naming the dtype, and collectives inside
``torch.distributed._coalescing_manager`` give the results they give outside it.

One launch serves every test of the module (each check is reported by name)."""
from __future__ import annotations

import pytest

from launcher import torchrun

NPROC = 2


@pytest.fixture(scope="module")
def results():
    launch = torchrun("reductions_dtypes.py", nproc=NPROC, timeout=120,
                      env={"TORCH_NPU_MEMORY_CAPACITY_MB": "64"})
    assert launch.returncode == 0, launch.explain()
    out = [launch.result(r) for r in range(NPROC)]
    for r in out:
        assert r["failures"] == [], r["failures"]
    return out


def _checked(results, names):
    for r in results:
        missing = set(names) - set(r["checked"])
        assert not missing, missing


def test_int16_reductions_wrap_like_int16_on_cpu(results):
    ops = ("SUM", "PRODUCT", "PRODUCT small", "MIN", "MAX", "BXOR", "BAND", "AVG")
    _checked(results, [f"int16 all_reduce {op}" for op in ops] + [
        "int16 all_reduce 0-dim", "int16 reduce SUM", "int16 reduce_scatter SUM",
        "int16 reduce_scatter_tensor SUM", "int16 reduce_scatter_tensor AVG", "int16 all_reduce_coalesced",
        "int16 and int32 coalesced"])
    for r in results:  # the data overflowed int16: the checks tested the wrap-around
        assert {"int16 all_reduce SUM", "int16 reduce_scatter SUM", "int16 reduce_scatter_tensor SUM"} <= set(
            r["wrapped"]), r["wrapped"]


def test_unsigned_reductions_are_refused_and_the_group_stays_usable(results):
    _checked(results, [f"{op} torch.{dtype} refused" for dtype in ("uint16", "uint32", "uint64")
                       for op in ("all_reduce", "reduce", "reduce_scatter_tensor", "reduce_scatter")])


def test_coalescing_manager_equals_plain_collectives(results):
    _checked(results, ["all_reduce without coalescing", "coalesced all_reduce async", "coalesced all_reduce sync MAX",
                       "coalesced all_reduce without device", "coalesced all_gather_into_tensor",
                       "coalesced reduce_scatter_tensor AVG", "broadcast and all_gather in a coalescing region",
                       "all_reduce after the regions"])
    for r in results:
        assert "coalesced works 1" in r["checked"] and "empty region works 0" in r["checked"], r["checked"]
