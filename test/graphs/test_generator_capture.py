"""Generators and NPU graph capture, with CUDA's rules.

During a capture the seed and offset of a generator can be neither read nor changed
(``manual_seed``, ``seed``, ``get_rng_state``, ``set_rng_state``, ``initial_seed``,
``get_offset``/``set_offset``, ``clone_state`` raise, as CUDA's ``assertNotCapturing``
makes them), and the refused call leaves the capture usable. A captured draw from a
generator other than the default ones needs ``NPUGraph.register_generator_state``, as on
CUDA; each replay of it then draws what an eager call at the generator's offset of that
moment draws, bit for bit, and advances the offset.
"""
from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from philox_reference import reference_generator  # noqa: E402

REFUSED = {
    "torch.npu.manual_seed": lambda gen: torch.npu.manual_seed(3),
    "torch.manual_seed": lambda gen: torch.manual_seed(3),
    "torch.npu.seed": lambda gen: torch.npu.seed(),
    "torch.npu.get_rng_state": lambda gen: torch.npu.get_rng_state(),
    "torch.npu.set_rng_state": lambda gen: torch.npu.set_rng_state(torch.zeros(16, dtype=torch.uint8)),
    "torch.npu.initial_seed": lambda gen: torch.npu.initial_seed(),
    "Generator.get_offset": lambda gen: gen.get_offset(),
    "Generator.set_offset": lambda gen: gen.set_offset(8),
    "Generator.clone_state": lambda gen: gen.clone_state(),
    "user Generator.manual_seed": lambda gen: torch.Generator("npu").manual_seed(1),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_generator_state_calls_are_refused_and_the_capture_goes_on(name):
    gen = torch.npu.default_generators[0]
    torch.npu.manual_seed(11)
    user = torch.Generator("npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        with pytest.raises(RuntimeError, match="during NPU graph capture"):
            REFUSED[name](user if name.startswith("user") else gen)
        out = torch.rand(6, device="npu")  # the capture still records
    assert gen.initial_seed() == 11 and gen.get_offset() == 0  # the refused call changed nothing
    g.replay()
    torch.testing.assert_close(out.cpu(), torch.rand(6, generator=reference_generator(11, 0)), rtol=0, atol=0)
    assert gen.get_offset() == 8


def test_a_refusal_leaving_the_with_block_ends_the_capture_cleanly():
    torch.npu.manual_seed(2)
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="Cannot call NpuGeneratorImpl::set_current_seed during NPU graph"):
        with torch.npu.graph(g):
            torch.rand(4, device="npu")
            torch.npu.manual_seed(5)
    assert not torch.npu.is_current_stream_capturing()
    assert torch.npu.initial_seed() == 2
    g2 = torch.npu.NPUGraph()
    with torch.npu.graph(g2):  # the stream captures again
        out = torch.rand(4, device="npu")
    g2.replay()
    torch.testing.assert_close(out.cpu(), torch.rand(4, generator=reference_generator(2, 0)), rtol=0, atol=0)


def test_capture_begin_and_end_around_a_refusal():
    g = torch.npu.NPUGraph()
    stream = torch.npu.Stream()
    with torch.npu.stream(stream):
        g.capture_begin()
        with pytest.raises(RuntimeError, match="get_state during NPU graph capture"):
            torch.npu.get_rng_state()
        out = torch.ones(3, device="npu") * 2
        g.capture_end()
    g.replay()
    assert torch.equal(out.cpu(), torch.full((3,), 2.0))


def test_graph_safe_swaps_and_other_streams_are_allowed():
    gen = torch.npu.default_generators[0]
    torch.npu.manual_seed(4)
    saved = gen.graphsafe_get_state()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        gen.graphsafe_set_state(saved)  # what graph-safe RNG does inside captures
        with torch.npu.stream(torch.npu.Stream()):  # a stream that is not captured
            assert torch.npu.initial_seed() == 4
        torch.rand(2, device="npu")
    g.replay()


def test_capture_report_lists_generator_state_calls():
    def step():
        torch.npu.get_rng_state()
        return torch.rand(3, device="npu", generator=torch.Generator("npu"))

    report = torch.npu.graphs.capture_report(step)
    assert [p.kind for p in report.problems] == ["generator state", "unregistered generator"]
    assert report.problems[0].op == "NpuGeneratorImpl::get_state"
    assert report.result.shape == (3,)


def test_capture_report_accepts_the_generators_the_graph_registers():
    user = torch.Generator("npu")

    def step():
        return torch.rand(3, device="npu", generator=user)

    assert [p.kind for p in torch.npu.graphs.capture_report(step).problems] == ["unregistered generator"]
    report = torch.npu.graphs.capture_report(step, generators=[user])
    assert report.problems == () and report.result.shape == (3,)


def test_registered_generator_replays_draw_at_its_offset_bit_for_bit():
    user = torch.Generator("npu")
    user.manual_seed(21)
    user.set_offset(8)
    g = torch.npu.NPUGraph()
    g.register_generator_state(user)
    with torch.npu.graph(g):
        a = torch.rand(10, device="npu", generator=user)
        b = torch.randn(3, dtype=torch.float64, device="npu", generator=user)
    assert user.get_offset() == 8  # capture records, it does not draw
    for start in (8, 8 + 12 + 8):
        g.replay()
        ref = reference_generator(21, start)
        torch.testing.assert_close(a.cpu(), torch.rand(10, generator=ref), rtol=0, atol=0)
        after_a = start + 12
        torch.testing.assert_close(b.cpu(), torch.randn(3, dtype=torch.float64,
                                                        generator=reference_generator(21, after_a)), rtol=0, atol=0)
    # Each replay advanced the offset as the two eager calls do.
    eager = torch.Generator("npu")
    eager.manual_seed(21)
    eager.set_offset(8)
    for _ in range(2):
        torch.rand(10, device="npu", generator=eager)
        torch.randn(3, dtype=torch.float64, device="npu", generator=eager)
    assert user.get_offset() == eager.get_offset() == 8 + 2 * (12 + 8)
    # A reseeded generator is followed by the next replay.
    user.manual_seed(99)
    g.replay()
    torch.testing.assert_close(a.cpu(), torch.rand(10, generator=reference_generator(99, 0)), rtol=0, atol=0)


def test_unregistered_generator_is_refused_and_the_capture_goes_on():
    user = torch.Generator("npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        with pytest.raises(RuntimeError, match=r"not registered with the graph.*register_generator_state"):
            torch.rand(4, device="npu", generator=user)
        out = torch.ones(2, device="npu") + 1
    g.replay()
    assert torch.equal(out.cpu(), torch.full((2,), 2.0))
    assert user.get_offset() == 0


def test_registration_errors():
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="expects an npu generator"):
        g.register_generator_state(torch.Generator())
    with pytest.raises(TypeError, match="expects a torch.Generator"):
        g.register_generator_state("npu")
    with torch.npu.graph(g):
        with pytest.raises(RuntimeError, match="before capture_begin"):
            g.register_generator_state(torch.Generator("npu"))
