"""NPU graph capture of operators registered through torch.library.

An operator of a library reaches the npu through the fallback, which records it into a
capture: its outputs get their geometry from its meta kernel and their memory from the
graph's pool, and replay copies the CPU kernel's results there. Outputs of an operator that
returns a list and a tensor land each in its own place at replay (element k of list return
r and return r' are distinct slots; element 0 of return 0 once received return 1). An
operator without a meta kernel is refused as unsupported, found from the dispatcher's
registrations: the error text of a meta kernel that raises does not decide it, and neither
does the wording of the Meta fallback's error (which once made a missing kernel read as a
value-dependent shape).
"""
import pytest
import torch

from graphs_compare import assert_close_to_cpu

_lib = torch.library.Library("npu_capture_test", "DEF")
_lib.define("parts_and_total(Tensor x) -> (Tensor[], Tensor)")
_lib.define("cpu_only(Tensor x) -> Tensor")
_lib.define("meta_refuses(Tensor x) -> Tensor")


def _parts_and_total(x):
    return [x * 2, x * 3], x.sum()


def _parts_and_total_meta(x):
    return [torch.empty_like(x), torch.empty_like(x)], x.new_empty(())


def _meta_refuses(x):
    # A meta kernel that cannot give the shape, with words a missing kernel's error also has.
    raise RuntimeError("Could not run meta_refuses: NotImplemented for values it has not seen")


_lib.impl("parts_and_total", _parts_and_total, "CPU")
_lib.impl("parts_and_total", _parts_and_total_meta, "Meta")
_lib.impl("cpu_only", lambda x: x + 1, "CPU")
_lib.impl("meta_refuses", lambda x: x + 1, "CPU")
_lib.impl("meta_refuses", _meta_refuses, "Meta")


def test_list_and_tensor_returns_replay_into_their_own_outputs():
    x = torch.randn(5).npu()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        parts, total = torch.ops.npu_capture_test.parts_and_total(x)
    for _ in range(2):
        new = torch.randn(5)
        x.copy_(new.npu())
        for p in parts:
            p.fill_(-7)
        total.fill_(-7)
        g.replay()
        want_parts, want_total = _parts_and_total(new)
        assert_close_to_cpu(parts[0], want_parts[0])
        assert_close_to_cpu(parts[1], want_parts[1])
        assert_close_to_cpu(total, want_total)


def test_operator_without_meta_kernel_is_refused_as_unsupported():
    x = torch.randn(4, device="npu")
    report = torch.npu.graphs.capture_report(lambda t: torch.ops.npu_capture_test.cpu_only(t), x)
    assert [p.kind for p in report.problems] == ["unsupported op"]
    assert "no shape function (meta kernel)" in report.problems[0].detail
    # The check run ran the step.
    assert_close_to_cpu(report.result, x.cpu() + 1)

    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="npu_capture_test::cpu_only: it has no shape function"):
        with torch.npu.graph(g):
            torch.ops.npu_capture_test.cpu_only(x)
    assert not torch.npu.is_current_stream_capturing()


def test_meta_kernel_that_raises_is_not_taken_for_a_missing_one():
    # With the compiler stack loaded, an operator's Python meta kernel is what gives its
    # output shape during capture (without it, its CPU kernel on scratch copies does).
    import torch._dynamo  # noqa: F401

    x = torch.randn(4, device="npu")
    report = torch.npu.graphs.capture_report(lambda t: torch.ops.npu_capture_test.meta_refuses(t), x)
    assert [p.kind for p in report.problems] == ["dynamic output shape"]
    assert "no shape function" not in report.problems[0].detail
    assert_close_to_cpu(report.result, x.cpu() + 1)
