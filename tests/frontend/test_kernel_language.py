"""What Python a kernel may be written in, each kernel checked on the CPU backend and on the
interpreter against a NumPy/Python reference: grid-stride loops, numba-style `cuda.*` names and
dynamic shared arrays, device functions (defaults, keywords, tuples, local arrays, outputs),
module-level constants, augmented assignment and tuples; and the errors for what it may not
(CompileError with file:line:col, caret and hint; LaunchError for bad launches)."""
from __future__ import annotations

import math
import types

import numpy as np
import pytest

import zymo as zm

from reference_check import BACKENDS, cdiv, check, run

RNG = np.random.default_rng(1234)


# ---- vector add with grid-stride loop ---------------------------------------------------------
@zm.kernel
def vadd_gridstride(a, b, out):
    start = zm.grid(1)
    stride = zm.gridsize(1)
    for i in range(start, out.shape[0], stride):
        out[i] = a[i] + b[i]


@pytest.mark.parametrize("n", [1, 37, 256, 1000])
def test_vadd_gridstride(n):
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    check(vadd_gridstride, 3, 64, [a, b, np.zeros(n, np.float32)], {2: a + b})


def test_vadd_empty():
    a = np.zeros(0, np.float32)
    check(vadd_gridstride, 1, 32, [a, a.copy(), a.copy()], {})


# ---- numba-style: cuda.* names ----------------------------------------------------------------
cuda = types.SimpleNamespace()


def _numba_clamp_scale(x, lo, hi, out):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= x.size:
        return
    v = x[i] * 3.0
    if v < lo:
        v = lo
    elif v > hi:
        v = hi
    out[i] = v


numba_clamp_scale = zm.kernel(_numba_clamp_scale)


def test_numba_clamp_scale():
    n = 300
    x = RNG.standard_normal(n).astype(np.float32)
    want = np.clip(x * np.float32(3.0), np.float32(-1.5), np.float32(2.0))
    check(numba_clamp_scale, cdiv(n, 128), 128, [x, -1.5, 2.0, np.zeros(n, np.float32)],
          {3: want})


# ---- device functions: defaults, keywords, tuples, nesting, early returns ---------------------
@zm.func
def clamp(v, lo=0.0, hi=1.0):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@zm.func
def polar(x, y):
    r = math.sqrt(x * x + y * y)
    return r, math.atan2(y, x)


@zm.func
def smoothstep(e0, e1, x):
    t = clamp((x - e0) / (e1 - e0))
    return t * t * (3.0 - 2.0 * t)


@zm.func
def sign_and_abs(v):
    if v < 0:
        return -1, -v
    elif v == 0:
        return 0, v
    return 1, v


@zm.kernel
def device_funcs(x, y, r, th, s, c, sg, ab):
    i = zm.grid(1)
    if i < x.shape[0]:
        r[i], th[i] = polar(x[i], y[i])
        s[i] = smoothstep(-0.5, 0.5, x[i])
        c[i] = clamp(y[i], 0.0, 0.25) + clamp(y[i], -0.3)
        g, a = sign_and_abs(y[i])
        sg[i] = g
        ab[i] = a


def test_device_funcs():
    n = 77
    x = RNG.standard_normal(n)
    y = RNG.standard_normal(n)
    y[3] = 0.0
    r = np.hypot(x, y)
    th = np.arctan2(y, x)
    t = np.clip((x + 0.5) / 1.0, 0, 1)
    s = t * t * (3 - 2 * t)
    c = np.clip(y, 0.0, 0.25) + np.clip(y, -0.3, 1.0)
    z = lambda: np.zeros(n)  # noqa: E731
    check(device_funcs, 2, 64, [x, y, z(), z(), z(), z(), np.zeros(n, np.int32), z()],
          {2: r, 3: th, 4: s, 5: c, 6: np.sign(y).astype(np.int32), 7: np.abs(y)},
          rtol=1e-12, atol=1e-14)


# ---- module-level constants and arrays, const.array_like Gaussian blur ------------------------
GAUSS5 = np.array([1, 4, 6, 4, 1], np.float32) / np.float32(16.0)
HALF = 2
SCALE = 0.5
OFFSETS = (-2, -1, 0, 1, 2)


@zm.kernel
def gauss_blur_rows(img, out):
    w = zm.const.array_like(GAUSS5)
    y, x = zm.grid(2)
    h, wd = img.shape
    if y < h and x < wd:
        acc = zm.f32(0.0)
        for k in range(-HALF, HALF + 1):
            xx = min(max(x + k, 0), wd - 1)
            acc += w[k + HALF] * img[y, xx]
        out[y, x] = acc * SCALE + GAUSS5[HALF] * 0


def _gauss_ref(img):
    h, wd = img.shape
    out = np.zeros_like(img, dtype=np.float64)
    for k in range(-HALF, HALF + 1):
        idx = np.clip(np.arange(wd) + k, 0, wd - 1)
        out += GAUSS5[k + HALF].astype(np.float64) * img[:, idx]
    return out * SCALE


@pytest.mark.parametrize("shape", [(1, 1), (7, 3), (10, 17)])
def test_gauss_blur_rows(shape):
    img = RNG.random(shape).astype(np.float32)
    grid = (cdiv(shape[0], 8), cdiv(shape[1], 8))
    check(gauss_blur_rows, grid, (8, 8), [img, np.zeros(shape, np.float32)],
          {1: _gauss_ref(img)}, rtol=1e-6, atol=1e-7)


LUT = np.array([(i * 37) % 256 for i in range(256)], np.uint8)


@zm.kernel
def lut_apply(img, out):
    i = zm.grid(1)
    if i < img.shape[0]:
        v = img[i]
        s = 0
        for o in OFFSETS:
            s += o
        out[i] = LUT[v] + s


def test_lut_apply():
    img = RNG.integers(0, 256, 100).astype(np.uint8)
    check(lut_apply, 2, 64, [img, np.zeros(100, np.uint8)], {1: LUT[img]})


# ---- device functions taking local arrays and writing output arrays ---------------------------
@zm.func
def fill_ramp(buf, n, v):
    for k in range(n):
        buf[k] = v + k


@zm.func
def sum_first(buf, n):
    s = 0.0
    for k in range(n):
        s += buf[k]
    return s


@zm.func
def store(arr, i, v):
    arr[i] = v


@zm.kernel
def local_through_funcs(x, out, out2):
    i = zm.grid(1)
    if i < x.shape[0]:
        b = zm.local.array(5, zm.f64)
        fill_ramp(b, 5, x[i])
        out[i] = sum_first(b, 5)
        store(out2, i, sum_first(b, 3))


def test_local_through_funcs():
    x = RNG.standard_normal(40)
    check(local_through_funcs, 1, 64, [x, np.zeros(40), np.zeros(40)],
          {1: 5 * x + 10, 2: 3 * x + 3}, rtol=1e-14, atol=1e-14)


# ---- augmented assignment on 2-D elements, swaps, loop-variable rebinding ---------------------
@zm.kernel
def aug_ops(x, misc):
    i, j = zm.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        x[i, j] += 1
        x[i, j] <<= 2
        x[i, j] //= 3
        x[i, j] %= 7
        x[i, j] -= 1
        x[i, j] ^= 5
    if i == 0 and j == 0:
        c = 0
        for k in range(5):
            k += 10
            c += k
        a, b = 1, 2
        a, b = b, a
        misc[0] = c
        misc[1] = a * 10 + b


def test_aug_ops():
    x = RNG.integers(-50, 50, (5, 6)).astype(np.int32)
    r = x.copy()
    r += 1
    r <<= 2
    r //= 3
    r %= 7
    r -= 1
    r ^= 5
    check(aug_ops, (1, 1), (8, 8), [x, np.zeros(2, np.int32)], {0: r, 1: np.array([60, 21])})


# ---- FNV-1a 64-bit hash (module-level u64 constants above 2**63) ------------------------------
FNV_OFFSET = 0xcbf29ce484222325
FNV_PRIME = 0x100000001b3


@zm.kernel
def fnv1a_rows(data, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        h = zm.u64(FNV_OFFSET)
        for k in range(data.shape[1]):
            h ^= data[i, k]
            h *= FNV_PRIME
        out[i] = h


def _fnv(row):
    h = FNV_OFFSET
    for b in row:
        h = ((h ^ int(b)) * FNV_PRIME) & (2**64 - 1)
    return h


def test_fnv1a_rows():
    data = RNG.integers(0, 256, (33, 7)).astype(np.uint8)
    want = np.array([_fnv(r) for r in data], np.uint64)
    check(fnv1a_rows, 2, 32, [data, np.zeros(33, np.uint64)], {1: want})


# ---- tuples: loop-carried tuple accumulators, nested tuple returns, tuple-typed parameters ----
@zm.func
def rotate2(p, c, s):
    x, y = p
    return (c * x - s * y, s * x + c * y)


@zm.func
def nested_pairs(a):
    return ((a, a + 1), (a * 2, (a * 3, a * 4)))


@zm.kernel
def tuple_work(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        acc = (0.0, 0.0, 1.0)
        for k in range(i + 1):
            acc = (acc[0] + x[k], acc[1] + x[k] * x[k], acc[2] * x[k])
        t = (acc[0], acc[1]) if acc[0] > 0 else (acc[1], acc[0])
        s = 0.0
        for k in range(2):
            s += t[k] * (k + 1)
        p = (x[i], 1.0)
        for _ in range(3):
            p = rotate2(p, 0.0, 1.0)
        (a, b), (c, (d, e)) = nested_pairs(i)
        out[i, 0] = s
        out[i, 1] = acc[2]
        out[i, 2] = p[0]
        out[i, 3] = p[1]
        out[i, 4] = a + b * 10 + c * 100 + d * 1000 + e * 10000


def _tuple_work_ref(x):
    out = np.zeros((len(x), 5))
    for i in range(len(x)):
        a0, a1, a2 = x[:i + 1].sum(), (x[:i + 1] ** 2).sum(), np.prod(x[:i + 1])
        t = (a0, a1) if a0 > 0 else (a1, a0)
        out[i] = [t[0] + 2 * t[1], a2, 1.0, -x[i], i + (i + 1) * 10 + 2 * i * 100
                  + 3 * i * 1000 + 4 * i * 10000]
    return out


def test_tuple_work():
    x = RNG.uniform(-1, 1, 13)
    check(tuple_work, 1, 16, [x, np.zeros((13, 5))], {1: _tuple_work_ref(x)}, rtol=1e-12,
          atol=1e-12)


# ---- numba-style dynamic shared memory: shared.array(0, ...) sized by the launch --------------
@zm.kernel
def reverse_dynamic_shared(x, out):
    s = cuda.shared.array(0, dtype=np.float32)
    t = cuda.threadIdx.x
    g = cuda.grid(1)
    s[t] = x[g]
    cuda.syncthreads()
    out[g] = s[cuda.blockDim.x - 1 - t]


def test_dynamic_shared_interp():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    reverse_dynamic_shared.on("interp")[4, 16, 0, 64](x, out)
    np.testing.assert_array_equal(out, x.reshape(4, 16)[:, ::-1].ravel())


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_dynamic_shared_backends(backend):
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    reverse_dynamic_shared.on(backend)[4, 16, 0, 64](x, out)
    np.testing.assert_array_equal(out, x.reshape(4, 16)[:, ::-1].ravel())


@zm.kernel
def dynamic_shared_views(out):
    ints = cuda.shared.array(0, dtype=np.int32)
    floats = cuda.shared.array(0, dtype=np.float64)   # the same bytes, as numba's
    t = cuda.threadIdx.x
    if t < len(ints):
        ints[t] = 3 * t
    cuda.syncthreads()
    if t == 0:
        window = ints[2:5]
        out[0] = len(ints)
        out[1] = len(floats)
        out[2] = len(window)
        out[3] = window[1]


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_dynamic_shared_extent_is_the_launchs(backend):
    """Its length is the launch's dynamic shared bytes over the element size (a static shape
    of 0 once made len() 0 and every slice of it empty)."""
    out = np.zeros(4, np.int64)
    dynamic_shared_views.on(backend)[2, 32, 0, 44](out)
    np.testing.assert_array_equal(out, [11, 5, 3, 9])


def test_dynamic_shared_is_not_differentiated():
    @zm.kernel
    def scale(x, y):
        s = cuda.shared.array(0, dtype=np.float64)
        t = cuda.threadIdx.x
        s[t] = x[t]
        cuda.syncthreads()
        y[t] = 2.0 * s[t]

    x, y = np.ones(8), np.zeros(8)
    with pytest.raises(zm.CompileError, match="dynamic shared array"):
        zm.grad(scale).on("interp")[1, 8, 0, 64](zm.Duplicated(x, np.zeros(8)),
                                                 zm.Duplicated(y, np.ones(8)))


# ---- invalid kernels: CompileError with file:line:col, caret and hint -------------------------
TAPS = np.array([0.25, 0.5, 0.25], np.float32)


@zm.kernel
def bad_float_index(x):
    i = zm.grid(1) * 0.5
    x[i] = 1.0


@zm.kernel
def bad_const_write(x):
    c = zm.const.array_like(TAPS)
    c[0] = 1.0
    x[0] = c[0]


@zm.kernel
def bad_module_array_write(x):
    TAPS[0] = 2.0
    x[0] = TAPS[0]


@zm.kernel
def bad_unknown_function(x):
    x[0] = undefined_helper(x[1])  # noqa: F821


@zm.kernel
def bad_try(x):
    try:
        x[0] = 1.0
    except Exception:
        pass


@zm.kernel
def bad_with(x):
    with open("f"):
        x[0] = 1.0


@zm.kernel
def bad_print(x):
    print(x)


@zm.kernel
def bad_bitop_float(x):
    x[0] = x[1] & 3


@zm.kernel
def bad_dynamic_local(x, n):
    b = zm.local.array(n, zm.f32)
    x[0] = b[0]


@zm.kernel
def bad_kwarg_call(x):
    x[0] = clamp(x[1], hi=0.5)


@zm.kernel
def bad_return_value(x):
    return x[0]


@zm.kernel
def bad_wrong_ndim(x):
    x[0, 1] = 1.0


ERROR_CASES = [
    (bad_float_index, "array index must be an integer", "int("),
    (bad_const_write, "read-only", None),
    (bad_module_array_write, "read-only", None),
    (bad_unknown_function, "undefined_helper", None),
    (bad_try, "try", "hint"),
    (bad_with, "with", None),
    (bad_print, "print() takes numbers, strings and tuples", "hint"),
    (bad_bitop_float, "bitwise", "hint"),
    (bad_dynamic_local, "compile time", "hint"),
    (bad_kwarg_call, "keyword", "hint"),
    (bad_return_value, "cannot return a value", "hint"),
    (bad_wrong_ndim, "indexed with 2 indices", "hint"),
]


@pytest.mark.parametrize("kernel,needle,hint", ERROR_CASES,
                         ids=lambda v: getattr(v, "__name__", ""))
def test_compile_errors(kernel, needle, hint):
    args = [np.zeros(4, np.float32)] + ([3] if kernel is bad_dynamic_local else [])
    for backend in BACKENDS:
        with pytest.raises(zm.CompileError) as info:
            run(kernel, 1, 1, args, backend)
        text = str(info.value)
        assert needle in text
        assert f"{__file__}:" in text
        assert "^" in text
        if hint:
            assert "hint:" in text


@pytest.mark.parametrize("kernel", [bad_const_write, bad_unknown_function],
                         ids=lambda k: k.__name__)
def test_compile_errors_have_hints(kernel):
    with pytest.raises(zm.CompileError) as info:
        kernel.specialize(np.zeros(4, np.float32))
    assert "hint:" in str(info.value)


def test_launch_errors():
    with pytest.raises(zm.LaunchError):
        vadd_gridstride[0, 64](np.zeros(0), np.zeros(0), np.zeros(0))
    with pytest.raises(zm.LaunchError):
        vadd_gridstride[1, 32]([1.0], [2.0], [0.0])
    with pytest.raises(zm.LaunchError):
        vadd_gridstride(np.zeros(1), np.zeros(1), np.zeros(1))
    with pytest.raises((zm.LaunchError, zm.CompileError)):
        vadd_gridstride[1, 32](np.zeros(1), np.zeros(1))


def test_float_grid_is_launch_error():
    with pytest.raises(zm.LaunchError):
        vadd_gridstride[2.5, 32](np.zeros(1), np.zeros(1), np.zeros(1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_readonly_output(backend):
    out = np.zeros(4)
    out.flags.writeable = False
    k = vadd_gridstride if backend == "cpu" else vadd_gridstride.on("interp")
    with pytest.raises(zm.LaunchError):
        k[1, 32](np.ones(4), np.ones(4), out)
