"""The engine state an npu random call draws from, rebuilt in plain Python.

An npu random call runs cpu's kernel on a Mersenne-Twister state filled from
Philox4x32-10 at the generator's (seed, offset). Rebuilding that state here, from
Philox's definition, lets tests check npu numbers bit for bit against cpu's kernels:
a cpu generator loaded with ``twister_state(seed, offset)`` draws exactly what one npu
call at (seed, offset) draws.
"""
from __future__ import annotations

import struct

import torch

MASK32 = 0xFFFFFFFF


def philox4x32_10(counter: tuple[int, int, int, int], key: tuple[int, int]) -> list[int]:
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK32, p1 & MASK32, ((p0 >> 32) ^ c3 ^ k1) & MASK32, p0 & MASK32
        k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
    return [c0, c1, c2, c3]


def twister_state(seed: int, offset: int) -> torch.Tensor:
    """cpu's 5056-byte generator state whose 624 words are Philox(key=seed,
    counter=(offset/4, j)) outputs, positioned so the next draw regenerates the block."""
    block = offset // 4
    words: list[int] = []
    for j in range(156):
        words += philox4x32_10((block & MASK32, block >> 32, j, 0), (seed & MASK32, seed >> 32))
    # seed, left, seeded, next, 624 words as uint64, the cached double normal (x, y, rho,
    # valid), the cached float normal and its flag.
    state = struct.pack("<QiiQ", seed, 1, 1, 0) + struct.pack("<624Q", *words)
    state += struct.pack("<dddi4x", 0.0, 0.0, 0.0, 0) + struct.pack("<f?3x", 0.0, False)
    return torch.frombuffer(bytearray(state), dtype=torch.uint8)


def reference_generator(seed: int, offset: int) -> torch.Generator:
    """A cpu generator that draws what one npu call at (seed, offset) draws."""
    g = torch.Generator()
    g.set_state(twister_state(seed, offset))
    return g


_manual_seed = torch.manual_seed


def seed_one_stream(seed: int) -> torch.Generator:
    """``torch.manual_seed`` for both devices, then cpu's generator loaded with the engine
    state npu draws from at (seed, offset 0): a random call draws the same on both.

    Random OpInfos seed inside their op (``wrapper_set_seed`` calls torch.manual_seed(42));
    patching ``torch.manual_seed`` with this function routes that seeding through it too."""
    generator = _manual_seed(seed)
    torch.set_rng_state(twister_state(int(seed), 0))
    return generator
