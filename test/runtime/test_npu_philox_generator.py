"""The npu generator's (seed, offset) state, CUDA's layout and errors, and the Philox stream.

The numbers an npu random call draws are torch's cpu kernels fed by a Mersenne-Twister
state filled from Philox4x32-10 at the generator's (seed, offset). The reference here
builds that state in plain Python (Philox written from its definition) and runs the cpu
kernel on it, so the stream is checked bit for bit, not only for reproducibility.
"""
from __future__ import annotations

import os
import struct
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.distributed.tensor._random import _PhiloxState

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from philox_reference import philox4x32_10, reference_generator  # noqa: E402


def test_reference_philox_matches_the_published_answers():
    assert philox4x32_10((0, 0, 0, 0), (0, 0)) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert philox4x32_10((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


def npu_at(seed: int, offset: int) -> None:
    torch.npu.manual_seed(seed)
    torch.npu.default_generators[torch.npu.current_device()].set_offset(offset)


def offset() -> int:
    return int(_PhiloxState(torch.npu.get_rng_state()).offset.item())


RANDOM_CALLS = {
    "rand": lambda g, d: torch.rand(37, device=d, generator=g),
    "rand_f64": lambda g, d: torch.rand(9, dtype=torch.float64, device=d, generator=g),
    "randn": lambda g, d: torch.randn(40, device=d, generator=g),
    "randn_small": lambda g, d: torch.randn(5, device=d, generator=g),
    "randint": lambda g, d: torch.randint(0, 1000, (30,), device=d, generator=g),
    "bernoulli": lambda g, d: torch.bernoulli(torch.full((50,), 0.3, device=d), generator=g),
    "randperm": lambda g, d: torch.randperm(20, device=d, generator=g),
    "exponential": lambda g, d: torch.empty(25, device=d).exponential_(generator=g),
    "multinomial": lambda g, d: torch.multinomial(torch.arange(1.0, 9.0, device=d), 5, generator=g),
}


@pytest.mark.parametrize("name", sorted(RANDOM_CALLS))
@pytest.mark.parametrize("seed,start", [(0, 0), (1234, 8), (2**63 + 12345, 2**33 + 4)])
def test_stream_is_the_cpu_kernel_over_philox(name, seed, start):
    call = RANDOM_CALLS[name]
    npu_at(seed, start)
    got = call(None, "npu").cpu()
    torch.testing.assert_close(got, call(reference_generator(seed, start), "cpu"), rtol=0, atol=0)


def test_explicit_npu_generator_uses_its_own_seed_and_offset():
    g = torch.Generator(device="npu")
    g.manual_seed(77)
    g.set_offset(16)
    got = torch.rand(10, device="npu", generator=g).cpu()
    torch.testing.assert_close(got, torch.rand(10, generator=reference_generator(77, 16)), rtol=0, atol=0)
    assert g.get_offset() == 28


def test_state_layout_is_seed_then_offset_as_dtensor_decodes_it():
    torch.npu.manual_seed(2**40 + 3)
    torch.rand(10, device="npu")
    state = torch.npu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu" and state.numel() == 16
    decoded = _PhiloxState(state)
    assert decoded.seed.item() == 2**40 + 3 and decoded.offset.item() == 12
    assert struct.unpack("<Qq", bytes(state.tolist())) == (2**40 + 3, 12)
    assert torch.Generator("npu").get_state().numel() == 16


def test_dtensor_style_offset_edit_moves_the_stream():
    torch.npu.manual_seed(5)
    decoded = _PhiloxState(torch.npu.get_rng_state())
    decoded.offset = torch.tensor([40], dtype=torch.int64)
    torch.npu.set_rng_state(decoded.state)
    assert offset() == 40
    torch.testing.assert_close(torch.rand(6, device="npu").cpu(), torch.rand(6, generator=reference_generator(5, 40)),
                               rtol=0, atol=0)


@pytest.mark.parametrize("call,drawn", [
    (lambda: torch.rand(5, device="npu"), 5),          # one 32-bit value per float
    (lambda: torch.rand(8, device="npu"), 8),
    (lambda: torch.rand(3, dtype=torch.float64, device="npu"), 6),  # two per double
    (lambda: torch.randint(0, 10, (1,), device="npu"), 1),
    (lambda: torch.empty(0, device="npu").uniform_(), 0),
])
def test_offset_advances_by_values_drawn_rounded_up_to_4(call, drawn):
    torch.npu.manual_seed(1)
    torch.npu.default_generators[0].set_offset(100)
    call()
    assert offset() == 100 + (drawn + 3) // 4 * 4


def test_offsets_chain_like_consecutive_calls():
    torch.npu.manual_seed(3)
    first, second = torch.rand(10, device="npu"), torch.rand(10, device="npu")
    npu_at(3, 12)
    torch.testing.assert_close(torch.rand(10, device="npu"), second, rtol=0, atol=0)
    assert not torch.equal(first, second)


def test_large_draw_counts_twister_blocks():
    torch.npu.manual_seed(9)
    torch.rand(5000, device="npu")   # 8 regenerations of the 624-word block
    assert offset() == 5000
    torch.randn(3001, dtype=torch.float64, device="npu")
    assert offset() > 5000 + 2 * 3000 and offset() % 4 == 0


def test_seeding_resets_the_offset_and_reproduces():
    torch.npu.manual_seed(42)
    a = torch.randn(16, device="npu")
    assert offset() > 0
    torch.manual_seed(42)  # seeds the npu generators too
    assert offset() == 0 and torch.npu.initial_seed() == 42
    torch.testing.assert_close(torch.randn(16, device="npu"), a, rtol=0, atol=0)
    torch.npu.seed()
    assert offset() == 0 and torch.npu.initial_seed() != 42


def test_restored_state_reproduces():
    torch.npu.manual_seed(8)
    torch.rand(7, device="npu")
    state = torch.npu.get_rng_state()
    a = torch.randn(33, device="npu")
    torch.rand(3, device="npu")
    torch.npu.set_rng_state(state)
    torch.testing.assert_close(torch.randn(33, device="npu"), a, rtol=0, atol=0)


def test_seed_only_state_means_offset_zero():
    torch.npu.manual_seed(1)
    torch.rand(9, device="npu")
    torch.npu.set_rng_state(torch.tensor([21, 0, 0, 0, 0, 0, 0, 0], dtype=torch.uint8))
    assert torch.npu.initial_seed() == 21 and offset() == 0


def test_npu_stream_differs_from_cpu_under_one_seed():
    torch.manual_seed(0)
    npu = torch.rand(100, device="npu").cpu()
    torch.manual_seed(0)
    assert not torch.equal(npu, torch.rand(100))


def test_errors_are_cudas():
    gen = torch.npu.default_generators[0]
    with pytest.raises(RuntimeError, match="offset must be a multiple of 4"):
        gen.set_offset(6)
    with pytest.raises(RuntimeError, match="RNG state is wrong size"):
        torch.npu.set_rng_state(torch.zeros(12, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="RNG state is wrong size"):
        torch.npu.set_rng_state(torch.zeros(5056, dtype=torch.uint8))
    with pytest.raises(TypeError, match="RNG state must be a torch.ByteTensor"):
        gen.set_state(torch.zeros(16, dtype=torch.int8))
    with pytest.raises(RuntimeError, match="RNG state must be contiguous"):
        gen.set_state(torch.zeros(32, dtype=torch.uint8)[::2])
    torch.npu.manual_seed(4)
    before = torch.npu.get_rng_state()
    bad = before.clone()
    bad[8] = 2  # offset 2
    with pytest.raises(RuntimeError, match="offset must be a multiple of 4"):
        torch.npu.set_rng_state(bad)
    assert torch.equal(torch.npu.get_rng_state(), before)  # nothing half-applied


def test_clone_state_and_graphsafe_swap_keep_seed_and_offset():
    gen = torch.npu.default_generators[0]
    gen.manual_seed(6)
    torch.rand(3, device="npu")
    saved = gen.clone_state()
    assert saved.get_offset() == 4 and saved.initial_seed() == 6
    first = torch.rand(8, device="npu")
    assert saved.get_offset() == 4  # the clone is independent
    gen.graphsafe_set_state(saved)
    torch.testing.assert_close(torch.rand(8, device="npu"), first, rtol=0, atol=0)
    assert gen.get_offset() == 12 and saved.get_offset() == 12  # swapped-in state is shared


def test_fork_rng_restores_the_npu_state():
    torch.npu.manual_seed(10)
    before = torch.npu.get_rng_state()
    with torch.random.fork_rng(devices=[0], device_type="npu"):
        torch.rand(50, device="npu")
        assert offset() == 52
    assert torch.equal(torch.npu.get_rng_state(), before)


def test_dropout_is_reproducible_at_an_offset():
    x = torch.ones(64, device="npu")
    npu_at(2, 20)
    a = F.dropout(x, 0.5)
    after = offset()
    assert after > 20
    npu_at(2, 20)
    torch.testing.assert_close(F.dropout(x, 0.5), a, rtol=0, atol=0)


def test_graph_replay_draws_at_the_current_offset_and_advances_it():
    torch.npu.manual_seed(13)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = torch.rand(10, device="npu")
        out2 = torch.randn(6, device="npu")
    assert offset() == 0  # capture records, it does not draw
    torch.npu.default_generators[0].set_offset(32)
    g.replay()
    torch.npu.synchronize()
    assert offset() == 32 + 12 + 12
    npu_at(13, 32)
    torch.testing.assert_close(out, torch.rand(10, device="npu"), rtol=0, atol=0)
    torch.testing.assert_close(out2, torch.randn(6, device="npu"), rtol=0, atol=0)
    npu_at(13, 32)
    g.replay()
    torch.npu.synchronize()
    first = out.clone()
    g.replay()
    torch.npu.synchronize()
    assert not torch.equal(first, out)


def test_compiled_random_follows_the_seed():
    from torch._inductor import config

    def fn(x):
        return F.dropout(x, 0.5) + torch.rand_like(x)

    x = torch.ones(32, device="npu")
    torch.npu.manual_seed(17)
    eager = fn(x)
    with config.patch(fallback_random=True):
        compiled = torch.compile(fn, backend="inductor")
        torch.npu.manual_seed(17)
        torch.testing.assert_close(compiled(x), eager, rtol=0, atol=0)
    compiled_own_rng = torch.compile(fn, backend="inductor")
    torch.npu.manual_seed(17)
    a = compiled_own_rng(x)
    torch.npu.manual_seed(17)
    torch.testing.assert_close(compiled_own_rng(x), a, rtol=0, atol=0)


# Calls whose operators bound their draws get an engine filled with only the Philox words
# those draws reach (a handful of blocks for a small call); their numbers must be the full
# fill's, for every dtype, size (across the partial-fill limit) and layout.
BOUNDED_CALLS = {
    "uniform_": lambda t, g: t.uniform_(-2, 3, generator=g),
    "normal_": lambda t, g: t.normal_(1, 2, generator=g),
    "random_": lambda t, g: t.random_(generator=g),
    "random_from_to": lambda t, g: t.random_(-5, 100, generator=g),
    "random_to": lambda t, g: t.random_(7, generator=g),
    "exponential_": lambda t, g: t.exponential_(generator=g),
    "cauchy_": lambda t, g: t.cauchy_(generator=g),
    "log_normal_": lambda t, g: t.log_normal_(generator=g),
    "geometric_": lambda t, g: t.geometric_(0.3, generator=g),
    "bernoulli_float": lambda t, g: t.bernoulli_(0.4, generator=g),
    "bernoulli_tensor": lambda t, g: t.bernoulli_(torch.linspace(0, 1, t.numel(), device=t.device)
                                                  .reshape(t.shape).to(t.dtype), generator=g),
}
BOUNDED_DTYPES = {
    "uniform_": (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64, torch.complex128),
    "normal_": (torch.float32, torch.float64, torch.bfloat16, torch.complex64, torch.complex128),
    "random_": (torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8),
    "random_from_to": (torch.float32, torch.int64, torch.int16),
    "random_to": (torch.float64, torch.int32),
}


@pytest.mark.parametrize("name", sorted(BOUNDED_CALLS))
def test_partial_fills_draw_the_full_fills_numbers(name):
    call = BOUNDED_CALLS[name]
    for dtype in BOUNDED_DTYPES.get(name, (torch.float32, torch.float64)):
        for size in (0, 1, 3, 5, 15, 16, 17, 100, 113, 114, 227, 300):
            for transposed in (False, True):
                shape = (size, 2) if transposed else (size,)
                start = 8 * size + 4

                def run(device, generator):
                    t = torch.zeros(shape, dtype=dtype, device=device)
                    t = t.t() if transposed else t  # a non-contiguous self
                    return call(t, generator)

                g = torch.Generator("npu")
                g.manual_seed(size + 1)
                g.set_offset(start)
                got = run("npu", g).cpu()
                ref_gen = reference_generator(size + 1, start)
                expected = run("cpu", ref_gen)
                torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True,
                                           msg=lambda m: f"{name} {dtype} {shape} t={transposed}: {m}")
                # The offset advanced by what cpu's kernel took from the same state.
                _, left, _, nxt = struct.unpack_from("<QiiQ", bytes(ref_gen.get_state()[:24].tolist()))
                if left + nxt == 624:  # the reference regenerated its block once
                    assert g.get_offset() == start + (nxt + 3) // 4 * 4, (name, dtype, shape)


def test_two_threads_drawing_from_one_generator_take_turns():
    import threading

    calls = 300
    for gen in (None, torch.Generator("npu")):
        torch.npu.manual_seed(31)
        if gen is not None:
            gen.manual_seed(31)
        drawn = {0: [], 1: []}
        start = threading.Barrier(2)

        def worker(k):
            torch.npu.set_device(0)
            start.wait()
            for _ in range(calls):
                drawn[k].append(torch.rand(5, device="npu", generator=gen).cpu())

        threads = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        total = (gen or torch.npu.default_generators[0]).get_offset()
        assert total == 2 * calls * 8
        # Every call drew the stream of its own offset: together they are the streams at
        # offsets 0, 8, 16, ..., each once.
        got = sorted(tuple(x.tolist()) for x in drawn[0] + drawn[1])
        serial = torch.Generator("npu")
        serial.manual_seed(31)
        expected = sorted(tuple(torch.rand(5, device="npu", generator=serial).cpu().tolist())
                          for _ in range(2 * calls))
        assert got == expected
