"""Inductor's `ops.load_seed` / `ops.rand` (dropout and friends) as Philox in arith.

Bit-for-bit the generator Inductor's C++ kernels call (`normalized_rand_cpu`:
at::Philox4_32(seed, 0, offset), 10 rounds, first output word, mapped to [0, 1)), so a
random kernel gives the same numbers whichever npu backend generated it.
"""

import torch

from .ssa import Val

_PHILOX_W = (0x9E3779B9, 0xBB67AE85)  # key increments per round
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)  # round multipliers
_UNIFORM_SCALE = 4.6566127342e-10  # largest scale with 0x7FFFFFFF * scale < 1.0 in f32


class RandomOps:
    """Mixin for the kernel emitter (needs `b`, `load`, and ValueOps' conversions)."""

    def load_seed(self, name, offset):
        import sympy

        return self.load(name, sympy.Integer(offset))

    def _u32(self, value):
        return self.b.constant(str(value - (1 << 32) if value >= 1 << 31 else value), "i32")

    def _mulhilo(self, const, x):
        b = self.b
        wide = b.assign(f"arith.extui {x} : i32 to i64")
        factor = b.constant(str(const), "i64")
        prod = b.assign(f"arith.muli {wide}, {factor} : i64")
        lo = b.assign(f"arith.trunci {prod} : i64 to i32")
        shift = b.constant("32", "i64")
        high = b.assign(f"arith.shrui {prod}, {shift} : i64")
        hi = b.assign(f"arith.trunci {high} : i64 to i32")
        return lo, hi

    def rand(self, seed, offset):
        b = self.b
        seed = self._convert(self._lift(seed), torch.int64)
        offset = self._convert(self._lift(offset), torch.int64)
        key0 = b.assign(f"arith.trunci {seed.name} : i64 to i32")
        key1 = self._u32(0)
        zero = self._u32(0)
        ctr = [b.assign(f"arith.trunci {offset.name} : i64 to i32"), zero, zero, zero]
        for round_ in range(10):
            lo0, hi0 = self._mulhilo(_PHILOX_M[0], ctr[0])
            lo1, hi1 = self._mulhilo(_PHILOX_M[1], ctr[2])
            x0 = b.assign(f"arith.xori {hi1}, {ctr[1]} : i32")
            x2 = b.assign(f"arith.xori {hi0}, {ctr[3]} : i32")
            ctr = [b.assign(f"arith.xori {x0}, {key0} : i32"), lo1, b.assign(f"arith.xori {x2}, {key1} : i32"), lo0]
            if round_ < 9:
                key0 = b.assign(f"arith.addi {key0}, {self._u32(_PHILOX_W[0])} : i32")
                key1 = b.assign(f"arith.addi {key1}, {self._u32(_PHILOX_W[1])} : i32")
        bits = b.assign(f"arith.andi {ctr[0]}, {self._u32(0x7FFFFFFF)} : i32")
        as_float = Val(b.assign(f"arith.sitofp {bits} : i32 to f32"), torch.float32)
        return self.mul(as_float, self.constant(_UNIFORM_SCALE, torch.float32))
