"""Branch-free f32 exp/tanh/erf built from arith ops, so LLVM can vectorize them.

`math.exp` and friends lower to scalar libm calls, which stop LLVM's loop vectorizer;
Inductor's C++ kernels use vectorized (Sleef) versions instead. These expansions use
the classic Cephes/Eigen range reductions and polynomials (errors of a few ulp) and
keep torch's special values: exp(-inf)=0, exp(inf)=inf, NaN propagates.
f64 keeps the libm path.
"""

import torch

from .ssa import Val

_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
_EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
_TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)
_ERF_NUM = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
            -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_DEN = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
            -1.42647390514189e-02)


class FastMath:
    """Mixin over ValueOps: overrides exp/tanh/erf for f32 values."""

    def _f32(self, v):
        return self.constant(v, torch.float32)

    def _horner(self, x, coeffs):
        acc = self._f32(coeffs[0])
        for c in coeffs[1:]:
            acc = self.fma(acc, x, self._f32(c))
        return acc

    def _pow2i(self, n_f):
        """2**n for an integral-valued f32 n in [-126, 127], built from the exponent bits."""
        b = self.b
        n = b.assign(f"arith.fptosi {n_f.name} : f32 to i32")
        biased = b.assign(f"arith.addi {n}, {b.constant('127', 'i32')} : i32")
        bits = b.assign(f"arith.shli {biased}, {b.constant('23', 'i32')} : i32")
        return Val(b.assign(f"arith.bitcast {bits} : i32 to f32"), torch.float32)

    def exp(self, x):
        x = self._floating(x)
        if x.dtype != torch.float32:
            return self._libm("math.exp", x)
        x = self.minimum(self.maximum(x, self._f32(-104.0)), self._f32(89.0))
        n = Val(self.b.assign(f"math.roundeven {self.mul(x, self._f32(_LOG2E)).name} : f32"), torch.float32)
        r = self.fma(n, self._f32(-_LN2_HI), x)
        r = self.fma(n, self._f32(-_LN2_LO), r)
        p = self._horner(r, _EXP_POLY)
        p = self.fma(p, self.mul(r, r), self.add(r, self._f32(1.0)))
        # scale by 2**n in two halves so that results near overflow/underflow stay exact
        half = Val(self.b.assign(f"math.floor {self.mul(n, self._f32(0.5)).name} : f32"), torch.float32)
        return self.mul(self.mul(p, self._pow2i(half)), self._pow2i(self.sub(n, half)))

    def tanh(self, x):
        x = self._floating(x)
        if x.dtype != torch.float32:
            return self._libm("math.tanh", x)
        ax = self.abs(x)
        z = self.mul(x, x)
        small = self.fma(self.mul(self._horner(z, _TANH_POLY), z), x, x)
        e = self.exp(self.mul(ax, self._f32(2.0)))
        big = self.sub(self._f32(1.0), self.truediv(self._f32(2.0), self.add(e, self._f32(1.0))))
        big = self.copysign(big, x)
        return self.where(self.lt(ax, self._f32(0.625)), small, big)

    def erf(self, x):
        x = self._floating(x)
        if x.dtype != torch.float32:
            return self._libm("math.erf", x)
        c = self.minimum(self.maximum(x, self._f32(-4.0)), self._f32(4.0))
        x2 = self.mul(c, c)
        p = self.mul(c, self._horner(x2, _ERF_NUM))
        q = self._horner(x2, _ERF_DEN)
        return self.truediv(p, q)

    def _libm(self, op, x):
        return Val(self.b.assign(f"{op} {x.name} : f64"), x.dtype)
