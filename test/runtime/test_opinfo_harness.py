"""The OpInfo harness's verdicts: an npu result that differs from a sound cpu reference is
a disagreement, and only a cpu reference that is unsound on this CPU (two cpu calls differ,
or a float16/bfloat16 result far from the float32 result) is set apart. Operators here are
small stand-ins whose cpu or npu result is wrong on purpose."""
from __future__ import annotations

import itertools

import torch
import torch_npu  # noqa: F401
from torch.testing._internal.opinfo.core import SampleInput

from opinfo_harness import check_sample, describe_cpu, forward_reference_problem


class StandIn:
    """The part of an OpInfo the harness uses: a name and a call."""

    def __init__(self, name, fn):
        self.name = name
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def _sample(dtype=torch.float32, requires_grad=False):
    x = torch.linspace(-3, 3, 24, dtype=torch.float32).reshape(4, 6).to(dtype)
    return SampleInput(x.requires_grad_(requires_grad), args=(0.5,))


def test_agreeing_operator_has_no_finding():
    op = StandIn("scaled_sin", lambda x, a: torch.sin(x) * a)
    assert check_sample(op, _sample(requires_grad=True), 0, with_backward=True, dtype=torch.float32) == []


def test_wrong_npu_result_is_a_disagreement():
    op = StandIn("off_on_npu", lambda x, a: x * a + (0.1 if x.device.type == "npu" else 0.0))
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        findings = check_sample(op, _sample(dtype), 0, with_backward=False, dtype=dtype)
        assert [(f.kind, f.cpu_unreliable) for f in findings] == [("forward", None)], (dtype, findings)


def test_wrong_npu_gradient_is_a_disagreement():
    def fn(x, a):
        return torch.where(x.new_tensor(x.device.type == "npu", dtype=torch.bool), x * (a + 1e-3), x * a)

    findings = check_sample(StandIn("grad_off_on_npu", fn), _sample(requires_grad=True), 0, True, torch.float32)
    assert len(findings) == 2
    assert all(f.cpu_unreliable is None for f in findings)
    assert {f.kind for f in findings} == {"forward", "backward"}


def test_npu_raising_where_cpu_does_not_is_a_disagreement():
    def fn(x, a):
        if x.device.type == "npu":
            raise RuntimeError("refused on npu")
        return x * a

    findings = check_sample(StandIn("raises_on_npu", fn), _sample(), 0, False, torch.float32)
    assert len(findings) == 1 and findings[0].cpu_unreliable is None
    assert "npu raised RuntimeError" in findings[0].reason


def test_cpu_disagreeing_with_itself_is_set_apart():
    calls = itertools.count(1)

    def fn(x, a):  # a cpu kernel that returns different garbage on each call
        if x.device.type == "cpu":
            return x * a + next(calls)
        return x * a

    findings = check_sample(StandIn("unstable_cpu", fn), _sample(torch.float16), 0, False, torch.float16)
    assert len(findings) == 1
    assert findings[0].cpu_unreliable is not None
    assert findings[0].cpu_unreliable.startswith("two cpu calls on the same inputs differ")


def test_reduced_float_cpu_far_from_float32_is_set_apart():
    def fn(x, a):  # deterministic, but wrong on cpu in float16 only
        if x.device.type == "cpu" and x.dtype == torch.float16:
            return x * a + 212
        return x * a

    findings = check_sample(StandIn("wrong_cpu_half", fn), _sample(torch.float16), 0, False, torch.float16)
    assert len(findings) == 1 and "from the float32 result" in findings[0].cpu_unreliable
    # inf where float32 is finite and representable counts as far too.
    def overflow(x, a):
        if x.device.type == "cpu" and x.dtype == torch.float16:
            return torch.full_like(x, float("inf"))
        return x * a

    findings = check_sample(StandIn("inf_cpu_half", overflow), _sample(torch.float16), 0, False, torch.float16)
    assert len(findings) == 1 and "inf/nan" in findings[0].cpu_unreliable


def test_sound_reduced_float_rounding_is_not_called_unreliable():
    # float16 rounding of a real reduction stays far below the threshold.
    op = StandIn("matmul", lambda x, a: x @ x.T * a)
    sample = _sample(torch.float16)
    cpu = op(sample.input, *sample.args)
    assert forward_reference_problem(op, sample, 0, cpu, torch.float16) is None
    # A real overflow of float16 (float32 beyond float16's range) is not judged.
    big = SampleInput(torch.full((3,), 300.0, dtype=torch.float16), args=(300.0,))
    mul = StandIn("mul", lambda x, a: x * a)
    assert forward_reference_problem(mul, big, 0, mul(big.input, 300.0), torch.float16) is None


def test_cpu_description_names_model_and_flags():
    cpu = describe_cpu()
    assert cpu["model"] and cpu["model"] != "unknown"
    assert cpu["aten_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert isinstance(cpu["onednn_float16"], bool)
    assert set(cpu["vector_flags"]) <= set(cpu["flags"])
