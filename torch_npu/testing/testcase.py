"""``TestCase`` and ``run_tests`` of Ascend's operator tests.

Ascend tests compare an npu result with the cpu result of the same inputs through
``assertRtolEqual`` (tolerance rule in ``rtol_comparison``) and the older PyTorch
``assertEqual(x, y, prec=...)`` (largest absolute difference within ``prec``). This
class gives both, with the helpers those tests call (sparse tensor generators, warning
checks, expect files), on top of ``expecttest.TestCase`` (``assertExpectedInline``).
Every test starts from the same seed, so a failing test fails the same way again.

``run_tests()`` runs the calling ``__main__`` module's tests with unittest; under pytest
the classes are collected as any ``unittest.TestCase``.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import os
import random
import re
import sys
import unittest
import warnings
from collections import OrderedDict
from typing import Any

import expecttest
import numpy as np
import torch

import torch_npu  # noqa: F401  (registers the npu device)

from .rtol_comparison import rtol_mismatch, to_numpy

__all__ = ["TestCase", "run_tests", "SEED"]

SEED = 1234
# run_tests(--accept) or EXPECTTEST_ACCEPT=1 rewrites expect files instead of comparing.
_ACCEPT_ENV = "EXPECTTEST_ACCEPT"


def _set_rng_seed(seed: int) -> None:
    torch.manual_seed(seed)  # seeds every npu generator as well
    random.seed(seed)
    np.random.seed(seed)


def _npu_memory_in_use() -> list[int]:
    if not torch.npu.is_initialized():
        return []
    return [torch.npu.memory_allocated(i) for i in range(torch.npu.device_count())]


class TestCase(expecttest.TestCase):
    """Base class of Ascend-style tests: cpu vs npu comparisons with a tolerance."""

    precision = 1e-5
    # Set True on a class to fail its tests when they leave npu memory allocated.
    _do_npu_memory_leak_check = False

    def __init__(self, method_name: str = "runTest") -> None:
        super().__init__(method_name)

    @classmethod
    def setUpClass(cls) -> None:
        _set_rng_seed(SEED)

    def setUp(self) -> None:
        _set_rng_seed(SEED)

    def run(self, result: Any = None) -> Any:
        """Run the test; with ``_do_npu_memory_leak_check`` also check that npu memory in
        use is the same after the test as before it."""
        if not self._do_npu_memory_leak_check:
            return super().run(result)
        before = _npu_memory_in_use()
        outcome = super().run(result)
        if torch.npu.is_initialized():
            torch.npu.synchronize()
        after = _npu_memory_in_use()
        leaked = [(i, a - (before[i] if i < len(before) else 0)) for i, a in enumerate(after)]
        leaked = [(i, n) for i, n in leaked if n > 0]
        if leaked and result is not None:
            detail = ", ".join(f"npu:{i} +{n} bytes" for i, n in leaked)
            try:
                raise AssertionError(f"{self.id()} leaked npu memory: {detail}")
            except AssertionError:
                result.addFailure(self, sys.exc_info())
        return outcome

    # -- tensor comparisons ------------------------------------------------------------

    def assertRtolEqual(self, x, y, prec=1.0e-4, prec16=1.0e-3, auto_trans_dtype=False, message=None):  # noqa: N802
        """Fail unless ``x`` and ``y`` (tensors on any device, arrays or numbers) agree
        within ``prec`` (``prec16`` for float16), as Ascend's operator tests compare."""
        a = to_numpy(x, auto_trans_dtype, like=y)
        b = to_numpy(y)
        problem = rtol_mismatch(a, b, prec, prec16)
        if problem is not None:
            self.fail(problem if message is None else f"{message}: {problem}")

    def assertEqual(self, x, y, prec=None, message="", allow_inf=False, exact_dtype=None):  # noqa: N802
        """Equality of tensors, numbers and containers of them, within ``prec``
        (default ``self.precision``) in absolute difference.

        Tensors of any devices compare by value on the host; their sizes must match and,
        with ``exact_dtype=True``, their dtypes. ``allow_inf`` lets two infinities of the
        same sign compare equal (they always do here: infinities compare exactly; the
        argument is kept for Ascend's signature).
        """
        if prec is None:
            prec = self.precision
        if not isinstance(prec, numbers.Real) or isinstance(prec, bool):
            raise TypeError(f"assertEqual: prec (the third argument) must be a number, got {prec!r}; "
                            "pass a failure message as message=")
        if isinstance(x, numbers.Number) and isinstance(y, torch.Tensor):
            x, y = y, x
        if isinstance(x, torch.Tensor) and isinstance(y, numbers.Number):
            # A number stands for a tensor of that value everywhere.
            self._assert_tensors_equal(x, torch.full(tuple(x.shape), y), prec, message, exact_dtype=False)
        elif isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            self._assert_tensors_equal(x, y, prec, message, exact_dtype)
        elif isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            self._assert_tensors_equal(torch.as_tensor(np.asarray(x)), torch.as_tensor(np.asarray(y)),
                                       prec, message, exact_dtype)
        elif isinstance(x, str | bytes) or isinstance(y, str | bytes):
            super().assertEqual(x, y, message or None)
        elif isinstance(x, dict) and isinstance(y, dict):
            if isinstance(x, OrderedDict) and isinstance(y, OrderedDict):
                self.assertEqual(list(x.items()), list(y.items()), prec, message, allow_inf, exact_dtype)
            else:
                self.assertEqual(set(x), set(y), prec, message, allow_inf, exact_dtype)
                for key in x:
                    self.assertEqual(x[key], y[key], prec, message, allow_inf, exact_dtype)
        elif isinstance(x, set) and isinstance(y, set):
            super().assertEqual(x, y, message or None)
        elif isinstance(x, list | tuple | torch.Size) and isinstance(y, list | tuple | torch.Size):
            x_items, y_items = list(x), list(y)
            super().assertEqual(len(x_items), len(y_items), message or None)
            for a, b in zip(x_items, y_items):
                self.assertEqual(a, b, prec, message, allow_inf, exact_dtype)
        elif isinstance(x, bool) and isinstance(y, bool):
            super().assertEqual(x, y, message or None)
        elif isinstance(x, numbers.Number) and isinstance(y, numbers.Number):
            self._assert_numbers_equal(x, y, prec, message, allow_inf)
        else:
            super().assertEqual(x, y, message or None)

    def _assert_numbers_equal(self, x, y, prec, message, allow_inf):
        if isinstance(x, complex) or isinstance(y, complex):
            self._assert_numbers_equal(complex(x).real, complex(y).real, prec, message, allow_inf)
            self._assert_numbers_equal(complex(x).imag, complex(y).imag, prec, message, allow_inf)
            return
        if math.isnan(x) or math.isnan(y):
            if not (math.isnan(x) and math.isnan(y)):
                self.fail(message or f"{x} != {y}")
            return
        if math.isinf(x) or math.isinf(y):
            if x != y:
                self.fail(message or f"{x} != {y}")
            return
        if abs(x - y) > prec:
            self.fail(message or f"{x} != {y} within {prec}")

    def _assert_tensors_equal(self, x: torch.Tensor, y: torch.Tensor, prec, message, exact_dtype):
        super().assertEqual(tuple(x.size()), tuple(y.size()), message or "tensor sizes differ")
        if exact_dtype and x.dtype != y.dtype:
            self.fail(message or f"dtypes differ: {x.dtype} vs {y.dtype}")
        if x.is_sparse or y.is_sparse:
            x, y = self.safeToDense(x), self.safeToDense(y)
        a, b = x.detach().cpu(), y.detach().cpu()
        if a.numel() == 0:
            return
        if a.dtype == torch.bool or b.dtype == torch.bool:
            if not torch.equal(a.to(torch.bool), b.to(torch.bool)):
                self.fail(message or f"boolean tensors differ:\n{a}\n{b}")
            return
        if a.is_complex() or b.is_complex():
            a = torch.view_as_real(a.to(torch.complex128).resolve_conj())
            b = torch.view_as_real(b.to(torch.complex128).resolve_conj())
        elif not (a.is_floating_point() or b.is_floating_point()):
            # Integers compare exactly in int64 (float64 would round above 2**53).
            max_err = (a.to(torch.int64) - b.to(torch.int64)).abs().max().item()
            if max_err > prec:
                self.fail(message or f"tensors differ: largest absolute difference {max_err} > {prec}")
            return
        a, b = a.to(torch.float64), b.to(torch.float64)
        nan_a, nan_b = torch.isnan(a), torch.isnan(b)
        if not torch.equal(nan_a, nan_b):
            self.fail(message or "NaNs at different places")
        inf_at = torch.isinf(a) | torch.isinf(b)
        if not torch.equal(a[inf_at], b[inf_at]):
            self.fail(message or "infinities differ")
        finite = ~(nan_a | inf_at)
        if not finite.any():
            return
        max_err = (a[finite] - b[finite]).abs().max().item()
        if max_err > prec:
            self.fail(message or f"tensors differ: largest absolute difference {max_err} > {prec}")

    def assertNotEqual(self, x, y, prec=None, message=""):  # noqa: N802
        """Fail when ``x`` equals ``y`` within ``prec`` (the negation of ``assertEqual``)."""
        try:
            self.assertEqual(x, y, prec, message)
        except AssertionError:
            return
        self.fail(message or f"{x!r} == {y!r}")

    def assertAlmostEqual(self, x, y, places=None, msg=None, delta=None, allow_inf=None):  # noqa: N802
        """``assertEqual`` with ``prec = delta`` or ``10 ** -places`` (7 places by default)."""
        if places is not None and delta is not None:
            raise TypeError("specify delta or places, not both")
        prec = delta if delta is not None else 10 ** -(7 if places is None else places)
        self.assertEqual(x, y, prec, msg or "", bool(allow_inf))

    def assertTensorsSlowEqual(self, x, y, prec=None, message=""):  # noqa: N802
        """Element by element on the host: sizes equal and every difference within ``prec``."""
        prec = self.precision if prec is None else prec
        a, b = x.detach().cpu(), y.detach().cpu()
        super().assertEqual(tuple(a.size()), tuple(b.size()), message or None)
        if a.numel() == 0:
            return
        max_err = 0.0
        for index in np.ndindex(*a.shape):
            diff = abs(float(a[index].item()) - float(b[index].item()))
            max_err = max(max_err, diff)
        self.assertLessEqual(max_err, prec, message or None)

    # -- sparse helpers -----------------------------------------------------------------

    def genSparseTensor(self, size, sparse_dim, nnz, is_uncoalesced, device="cpu"):  # noqa: N802
        """A random sparse COO tensor: ``(tensor, indices, values)``; with
        ``is_uncoalesced`` some indices repeat."""
        size = tuple(size)
        values = torch.randn(nnz, *size[sparse_dim:], device=device)
        indices = torch.rand(sparse_dim, nnz, device=device)
        indices.mul_(torch.tensor(size[:sparse_dim], dtype=indices.dtype, device=device).unsqueeze(1))
        indices = indices.to(torch.long)
        if is_uncoalesced and nnz > 0:
            values = torch.cat([values, torch.randn_like(values)], 0)
            indices = torch.cat([indices, indices], 1)
        tensor = torch.sparse_coo_tensor(indices, values, size, device=device, check_invariants=True)
        return tensor, indices, values

    def safeToDense(self, t):  # noqa: N802
        """The dense tensor of a sparse one (coalesced first, so duplicates are summed)."""
        return t.coalesce().to_dense() if t.is_sparse else t

    def safeCoalesce(self, t):  # noqa: N802
        """``t.coalesce()``, checked against a coalesce computed here by summing the values
        of repeated indices."""
        coalesced = t.coalesce()
        indices, values = t._indices(), t._values()
        sums: dict[tuple[int, ...], torch.Tensor] = {}
        for column in range(indices.size(1)):
            key = tuple(int(v) for v in indices[:, column].tolist())
            sums[key] = sums[key] + values[column] if key in sums else values[column].clone()
        if sums:
            keys = sorted(sums)
            ref_indices = torch.tensor(keys, dtype=torch.long).t().to(indices.device)
            ref_values = torch.stack([sums[k] for k in keys]).to(values.device)
        else:
            ref_indices = indices.new_empty(indices.size(0), 0)
            ref_values = values.new_empty(0, *values.shape[1:])
        reference = torch.sparse_coo_tensor(ref_indices, ref_values, t.size(), check_invariants=True)._coalesced_(True)
        self.assertEqual(coalesced._indices(), reference._indices())
        self.assertEqual(coalesced._values(), reference._values())
        return coalesced

    # -- other assertions ---------------------------------------------------------------

    def assertObjectIn(self, obj, iterable):  # noqa: N802
        """Fail unless ``obj`` itself (identity, not equality) is in ``iterable``."""
        if not any(item is obj for item in iterable):
            self.fail(f"object {obj!r} not found in iterable")

    def assertExpectedRaises(self, exc_type, call_fn, *args, **kwargs):  # noqa: N802
        """``call_fn(*args, **kwargs)`` must raise ``exc_type``; its message is compared
        with the expect file (``subname=`` picks the file, as in ``assertExpected``)."""
        subname = kwargs.pop("subname", None)
        try:
            call_fn(*args, **kwargs)
        except exc_type as exc:
            self.assertExpected(str(exc), subname)
            return
        self.fail(f"{getattr(call_fn, '__name__', call_fn)} did not raise {exc_type.__name__}")

    def assertNotWarn(self, call_fn, msg=""):  # noqa: N802
        """``call_fn()`` must emit no warning."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call_fn()
        self.assertTrue(len(caught) == 0, msg or f"unexpected warnings: {[str(w.message) for w in caught]}")

    def assertWarns(self, call_fn, msg=""):  # noqa: N802
        """``call_fn()`` must emit at least one warning (Ascend's form, not unittest's)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call_fn()
        self.assertTrue(len(caught) > 0, msg or f"{getattr(call_fn, '__name__', call_fn)} did not warn")

    @contextlib.contextmanager
    def maybeWarnsRegex(self, category, regex=""):  # noqa: N802
        """Context manager: the block may emit no warning; if it warns, one warning must be
        a ``category`` whose message matches ``regex``."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        if not caught:
            return
        if not any(issubclass(w.category, category) and re.search(regex, str(w.message)) for w in caught):
            seen = "; ".join(f"{w.category.__name__}: {w.message}" for w in caught)
            self.fail(f"no {category.__name__} matching {regex!r} among the warnings: {seen}")

    def assertExpected(self, s, subname=None):  # noqa: N802
        """Compare ``s`` with ``expect/<TestClass>.<test>[-subname].expect`` beside the test
        file; the file is written when accepting (``--accept`` or ``EXPECTTEST_ACCEPT=1``)."""
        if not isinstance(s, str):
            raise TypeError(f"assertExpected is strings only, got {type(s).__name__}")
        test_file = sys.modules[type(self).__module__].__file__ or "."
        expect_dir = os.path.join(os.path.dirname(os.path.abspath(test_file)), "expect")
        name = f"{type(self).__name__}.{self._testMethodName}" + (f"-{subname}" if subname else "")
        path = os.path.join(expect_dir, name + ".expect")
        accept = os.environ.get(_ACCEPT_ENV, "") not in ("", "0")
        if accept or not os.path.exists(path):
            if not accept:
                self.fail(f"no expect file {path}; to accept the output, re-run with --accept:\n{s}")
            os.makedirs(expect_dir, exist_ok=True)
            with open(path, "w") as f:
                f.write(s)
            return
        with open(path) as f:
            expected = f.read()
        super().assertEqual(s, expected, f"output differs from {path}")

    def assertExpectedStripMangled(self, s, subname=None):  # noqa: N802
        """``assertExpected`` after removing TorchScript's ``___torch_mangle_<n>`` names."""
        self.assertExpected(re.sub(r"\.___torch_mangle_\d+", "", s), subname)


def run_tests() -> None:
    """Run the tests of the ``__main__`` module with unittest (``python test_x.py [-k PATTERN]
    [--accept] [-v]``); exits non-zero when a test fails."""
    argv = list(sys.argv)
    if "--accept" in argv:
        argv.remove("--accept")
        os.environ[_ACCEPT_ENV] = "1"
    unittest.main(module="__main__", argv=argv)
