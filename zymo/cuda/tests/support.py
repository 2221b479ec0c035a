"""Helpers numba's CUDA tests import from `numba.cuda.tests.support`: numba's `TestCase` (with
`assertPreciseEqual`), `override_config`, `CheckWarningsMixin`, `MemoryLeakMixin`, platform
skips, captured streams and `run_in_subprocess`."""
from __future__ import annotations

import contextlib
import functools
import io
import subprocess
import sys
import unittest
import warnings

import numpy as np

from ..core import config

linux_only = unittest.skipIf(not sys.platform.startswith("linux"), "runs on Linux only")
windows_only = unittest.skipIf(not sys.platform.startswith("win"), "runs on Windows only")


def _has_cffi() -> bool:
    try:
        import cffi  # noqa: F401
    except ImportError:
        return False
    return True


skip_unless_cffi = unittest.skipUnless(_has_cffi(), "needs cffi (pip install cffi)")


@contextlib.contextmanager
def captured_output(stream_name: str):
    """Within it, `sys.<stream_name>` is a StringIO (yielded)."""
    saved = getattr(sys, stream_name)
    captured = io.StringIO()
    setattr(sys, stream_name, captured)
    try:
        yield captured
    finally:
        setattr(sys, stream_name, saved)


def captured_stdout():
    return captured_output("stdout")


def captured_stderr():
    return captured_output("stderr")


@contextlib.contextmanager
def override_config(name: str, value):
    """Within it, the config flag `name` (zymo.cuda.core.config) is `value`; restored after."""
    if not hasattr(config, name):
        raise AttributeError(f"zymo.cuda.core.config has no flag {name!r}; the flags are the "
                             f"upper-case names of that module")
    saved = getattr(config, name)
    setattr(config, name, value)
    try:
        yield
    finally:
        setattr(config, name, saved)


def run_in_subprocess(code: str, flags=(), env=None, timeout: float = 30):
    """Runs `code` with `python [flags] -c code`; returns (stdout, stderr) as text, or raises
    AssertionError with stderr when the process fails."""
    done = subprocess.run([sys.executable, *flags, "-c", code], env=env, capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode:
        raise AssertionError(f"the subprocess exited with {done.returncode}:\n{done.stderr}")
    return done.stdout, done.stderr


class CheckWarningsMixin:
    @contextlib.contextmanager
    def check_warnings(self, messages, category=RuntimeWarning):
        """Within it, each of `messages` must be (part of) a warning of `category`."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        matched = [(text, w) for text in messages for w in caught if text in str(w.message)]
        missing = [text for text in messages if all(text != m for m, _ in matched)]
        if missing:
            seen = "\n".join(f"  {w.category.__name__}: {w.message}" for w in caught) or "  none"
            raise AssertionError(f"no warning says {missing}; the warnings were:\n{seen}")
        for text, w in matched:
            if not issubclass(w.category, category):
                raise AssertionError(f"the warning {text!r} is a {w.category.__name__}, not a "
                                     f"{category.__name__}")


# ---- assertPreciseEqual -----------------------------------------------------------------------
_BITS = {"double": 53, "single": 24}


def _family(value) -> str:
    if isinstance(value, np.ndarray):
        return "array"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, (complex, np.complexfloating)):
        return "complex"
    if isinstance(value, (list, tuple)):
        return "sequence"
    return "other"


def _layout(a: np.ndarray) -> str:
    return "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "A"


def _number_mismatch(a, b, bits, ulps, ignore_sign_on_zero, abs_tol):
    """Boolean array: where float or complex numbers `a`, `b` differ as numba's
    assertPreciseEqual judges them. Numbers with a NaN (in either part) on both sides agree;
    `abs_tol` accepts a distance below it; with `bits` (None: exact) both parts may differ by
    2**(ulps - bits - 1) * (|a| + |b|) (moduli of the whole numbers); zeros on both sides,
    infinite parts and exact comparisons must match, signs of zeros too unless
    `ignore_sign_on_zero`."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(invalid="ignore", over="ignore"):
        wide_a, wide_b = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64), \
            b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
        ok = np.ones(a.shape, bool)
        both_zero = (wide_a == 0) & (wide_b == 0)
        delta = None if bits is None else 2.0 ** (ulps - bits - 1) * (np.abs(wide_a) +
                                                                      np.abs(wide_b))
        parts = [(wide_a.real, wide_b.real), (wide_a.imag, wide_b.imag)] \
            if a.dtype.kind == "c" else [(wide_a, wide_b)]
        for x, y in parts:
            exact = (x == y) & (ignore_sign_on_zero | (np.signbit(x) == np.signbit(y)))
            if delta is None:
                ok &= exact
            else:
                strict = both_zero | np.isinf(x) | np.isinf(y)
                ok &= np.where(strict, exact, np.abs(x - y) <= delta)
        ok |= np.isnan(wide_a) & np.isnan(wide_b)
        if abs_tol is not None:
            tol = np.finfo(a.dtype).eps if abs_tol == "eps" else float(abs_tol)
            ok |= np.abs(wide_a - wide_b) < tol
    return ~ok


class MemoryLeakMixin:
    """numba's leak check, on zymo's device memory: a test must leave as many device
    allocations alive as it found (after garbage collection). Without a GPU, device arrays are
    NumPy's and there is nothing of zymo's to leak."""

    _leak_check = True

    def disable_leak_check(self):
        self._leak_check = False

    @staticmethod
    def _live_allocations() -> int:
        import gc
        gc.collect()
        from ...runtime.cuda.arrays import LIVE
        return LIVE["allocations"]

    def setUp(self):
        super().setUp()
        self._live_before = self._live_allocations()

    def tearDown(self):
        super().tearDown()
        if self._leak_check:
            leaked = self._live_allocations() - self._live_before
            self.assertEqual(leaked, 0, f"{leaked} device allocations outlived the test")


class TestCase(unittest.TestCase):
    """numba's test case: `assertPreciseEqual`; `random`, a NumPy RandomState seeded with 42
    for each test."""

    @functools.cached_property
    def random(self):
        return np.random.RandomState(42)

    def reset_module_warnings(self, module):
        """Forget the warnings `module` (or its name) has shown, so they show again."""
        module = sys.modules[module] if isinstance(module, str) else module
        if hasattr(module, "__warningregistry__"):
            del module.__warningregistry__

    def assertPreciseEqual(self, first, second, prec="exact", ulps=1, msg=None,   # noqa: N802
                           ignore_sign_on_zero=False, abs_tol=None):
        """Equality with types checked: arrays must agree in dtype, shape and layout and then
        element by element; lists and tuples item by item; numbers must be of one family
        (bool, int, float, complex) and equal: exactly for bools and ints and with
        prec="exact"; for floats with prec="double" (53 significant bits) or "single" (24)
        up to `ulps` units in the last place, complex numbers by parts. NaN equals NaN;
        zeros of different sign differ unless `ignore_sign_on_zero`; `abs_tol` (a number or
        "eps") accepts any difference up to it."""
        if prec not in ("exact", "double", "single"):
            raise ValueError(f"prec is 'exact', 'double' or 'single', not {prec!r}")
        problem = self._precise_difference(first, second, prec, ulps, ignore_sign_on_zero,
                                           abs_tol)
        if problem:
            text = f"when comparing {first!r} and {second!r}: {problem}"
            self.fail(self._formatMessage(msg, text))

    def _precise_difference(self, first, second, prec, ulps, ignore_zero, abs_tol):
        kind, other = _family(first), _family(second)
        if kind != other:
            return f"{type(first).__name__} and {type(second).__name__} are not comparable"
        if kind == "sequence":
            if len(first) != len(second):
                return f"{len(first)} items vs {len(second)}"
            for i, (a, b) in enumerate(zip(first, second)):
                problem = self._precise_difference(a, b, prec, ulps, ignore_zero, abs_tol)
                if problem:
                    return f"at item {i}: {problem}"
            return None
        if kind == "array":
            for what, a, b in (("dtype", first.dtype, second.dtype),
                               ("shape", first.shape, second.shape),
                               ("layout", _layout(first), _layout(second))):
                if a != b:
                    return f"{what} {a} != {b}"
            return _elements_differ(np.asarray(first), np.asarray(second), prec, ulps,
                                    ignore_zero, abs_tol)
        if kind in ("bool", "int", "other"):
            return None if first == second else f"{first!r} != {second!r}"
        return _elements_differ(np.asarray(first), np.asarray(second), prec, ulps, ignore_zero,
                                abs_tol)


def _elements_differ(a, b, prec, ulps, ignore_zero, abs_tol):
    if a.dtype.kind in "fc":
        bits = None if prec == "exact" else _BITS[prec]
        wrong = _number_mismatch(a, b, bits, ulps, ignore_zero, abs_tol)
    elif a.dtype.kind == "O":
        wrong = np.array([x != y for x, y in zip(a.ravel(), b.ravel())]).reshape(a.shape)
    else:
        wrong = a != b
    if not np.any(wrong):
        return None
    index = tuple(int(i) for i in np.argwhere(wrong)[0])
    where = f" at index {index}" if a.ndim else ""
    return f"{a[index]!r} != {b[index]!r}{where} ({int(np.count_nonzero(wrong))} differ)"
