"""Branch-free f32 exp/tanh/erf/sin/cos built from arith ops, so LLVM can vectorize them.

`math.exp` and friends lower to scalar libm calls, which stop LLVM's loop vectorizer;
Inductor's C++ kernels use vectorized (Sleef) versions instead. These expansions use
the classic Cephes/Eigen range reductions and polynomials (errors of a few ulp) and
keep torch's special values: exp(-inf)=0, exp(inf)=inf, NaN propagates. sin/cos use
the Cephes reduction by pi/4, exact to a few ulp for |x| < 8192; larger arguments lose
accuracy (as Cephes' sinf does). f64 keeps the libm path.
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


_FOPI = 1.27323954473516  # 4 / pi
_DP = (0.78515625, 2.4187564849853515625e-4, 3.77489497744594108e-8)  # pi/4 in three parts
_SIN_POLY = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_COS_POLY = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)


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

    def _sincos(self, x, want_cos):
        b = self.b
        ax = self.abs(x)
        j = b.assign(f"arith.fptosi {self.mul(ax, self._f32(_FOPI)).name} : f32 to i32")
        one, seven = b.constant("1", "i32"), b.constant("7", "i32")
        j = b.assign(f"arith.addi {j}, {one} : i32")
        j = b.assign(f"arith.andi {j}, {b.constant('-2', 'i32')} : i32")
        y = Val(b.assign(f"arith.sitofp {j} : i32 to f32"), torch.float32)
        j = b.assign(f"arith.andi {j}, {seven} : i32")
        z = ax
        for part in _DP:
            z = self.fma(y, self._f32(-part), z)
        zz = self.mul(z, z)
        sin_p = self.fma(self.mul(self._horner(zz, _SIN_POLY), zz), z, z)
        cos_p = self.add(
            self.fma(self.mul(self._horner(zz, _COS_POLY), zz), zz, self.mul(zz, self._f32(-0.5))),
            self._f32(1.0),
        )
        jv = Val(j, torch.int32)
        # octant j (even, 0..6): 2 and 6 swap the polynomials, 4 (and 2 for cos) flip the sign
        swap = self.eq(self.bitwise_and(jv, self.constant(2, torch.int32)), self.constant(2, torch.int32))
        flip4 = self.eq(self.bitwise_and(jv, self.constant(4, torch.int32)), self.constant(4, torch.int32))
        if want_cos:
            r = self.where(swap, sin_p, cos_p)
            negate = self.logical_xor(flip4, swap)
        else:
            r = self.where(swap, cos_p, sin_p)
            negate = self.logical_xor(flip4, self.signbit(x))
        r = self.where(negate, self.neg(r), r)
        # inf and nan give nan, as libm does
        return self.where(self.isinf(x), self._f32(float("nan")), self.add(r, self.mul(x, self._f32(0.0))))

    def sin(self, x):
        x = self._floating(x)
        if x.dtype != torch.float32:
            return self._libm("math.sin", x)
        return self._sincos(x, False)

    def cos(self, x):
        x = self._floating(x)
        if x.dtype != torch.float32:
            return self._libm("math.cos", x)
        return self._sincos(x, True)

    def _libm(self, op, x):
        return Val(self.b.assign(f"{op} {x.name} : f64"), x.dtype)
