"""numba.cuda's intrinsics in zymo's kernel language (issue 27): atomics (inc, dec, and_, or_,
xor, nanmax/nanmin beside max/min, compare_and_swap), block votes (syncthreads_count/and/or),
warp ops (syncwarp, match_any/all_sync, lanemask_lt), selp, and the math functions numba takes.
Each on the CPU backend and the interpreter against NumPy/Python, in PTX assembled by ptxas for
sm_80 and sm_90; derivatives in tests/ad/test_rules.py (every differentiable op)."""
from __future__ import annotations

import math
import types

import numpy as np
import pytest

import zymo as zm
from zymo.diagnostics import WarpSyncError
from zymo.backend.nvptx import ptxas

BACKENDS = ("cpu", "interp")
ARCHES = ("sm_80", "sm_90")
needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")


def assembles(kernel, *types):
    """The kernel's PTX for each arch, each assembled by ptxas; the sm_90 PTX."""
    spec = kernel.specialize(*types)
    for arch in ARCHES:
        ptxas.assemble(spec.ptx(arch), arch)
    return spec.ptx("sm_90")


# ---- atomics -------------------------------------------------------------------------------
def inc_reference(old, limit):
    return 0 if old >= limit else old + 1


def dec_reference(old, limit):
    return limit if old == 0 or old > limit else old - 1


@zm.kernel
def wrapping_counters(counters, limit, olds):
    i = zm.grid(1)
    if i < olds.shape[1]:
        olds[0, i] = zm.atomic.inc(counters, 0, limit)
        olds[1, i] = zm.atomic.dec(counters, 1, limit)
        olds[2, i] = zm.atomic.inc(counters, 2, limit)
        olds[3, i] = zm.atomic.dec(counters, 3, limit)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("limit_of", [lambda top: 9, lambda top: top], ids=["small", "top"])
def test_inc_and_dec_wrap_as_cuda(backend, dtype, limit_of):
    """inc wraps to 0 once the old value reaches the limit (also from above it); dec wraps to
    the limit at 0 and from above it; at the type's top no arithmetic overflow happens."""
    top = int(np.iinfo(dtype).max)
    limit = limit_of(top)
    start = [limit - 2, 1, limit + 5 if limit < top else 3, top if limit < top else 0]
    n = 45
    counters, olds = np.array(start, dtype), np.zeros((4, n), dtype)
    wrapping_counters.on(backend)[2, 32](counters, dtype(limit), olds)
    for slot, step in enumerate((inc_reference, dec_reference) * 2):
        value, seen = start[slot], []
        for _ in range(n):
            seen.append(value)
            value = step(value, limit)
        assert int(counters[slot]) == value, (slot, backend)
        assert sorted(int(v) for v in olds[slot]) == sorted(seen), (slot, backend)


@zm.kernel
def bitwise_atomics(bits, x, olds):
    i = zm.grid(1)
    if i < x.shape[0]:
        olds[0, i] = zm.atomic.and_(bits, (0, i % 2), x[i])
        olds[1, i] = zm.atomic.or_(bits, (1, i % 2), x[i])
        olds[2, i] = zm.atomic.xor(bits, (2, i % 2), x[i])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_bitwise_atomics_with_tuple_indices(backend, dtype):
    info = np.iinfo(dtype)
    x = np.random.default_rng(3).integers(info.min, info.max, 70, dtype=dtype, endpoint=True)
    start = np.array([[-1, -1], [0, 0], [0, 5]]).astype(dtype)
    bits, olds = start.copy(), np.zeros((3, len(x)), dtype)
    bitwise_atomics.on(backend)[3, 32](bits, x, olds)
    for column in (0, 1):
        mine = x[column::2]
        assert bits[0, column] == np.bitwise_and.reduce(mine, initial=start[0, column])
        assert bits[1, column] == np.bitwise_or.reduce(mine, initial=start[1, column])
        assert bits[2, column] == np.bitwise_xor.reduce(mine, initial=start[2, column])
    # thread order on these backends: each old value is the fold of the threads before it
    expected_or = np.bitwise_or.accumulate(np.concatenate([[start[1, 0]], x[0::2]]))[:-1]
    np.testing.assert_array_equal(olds[1, 0::2], expected_or)


@zm.kernel
def extrema(memory, x):
    i = zm.grid(1)
    if i < x.shape[0]:
        zm.atomic.max(memory, (0, 0), x[i])
        zm.atomic.nanmax(memory, (0, 1), x[i])
        zm.atomic.min(memory, (1, 0), x[i])
        zm.atomic.nanmin(memory, (1, 1), x[i])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("start", [np.nan, 0.5, -np.inf], ids=["nan", "half", "-inf"])
def test_max_keeps_a_nan_in_memory_and_nanmax_replaces_it(backend, dtype, start):
    """numba: max/min ignore a NaN operand and keep a NaN already in memory; nanmax/nanmin
    treat a NaN on either side as missing."""
    x = np.random.default_rng(5).standard_normal(90).astype(dtype)
    x[[3, 40, 77]] = np.nan
    memory = np.full((2, 2), start, dtype)
    extrema.on(backend)[3, 32](memory, x)
    kept = np.isnan(start)
    both = np.append(x, dtype(start))
    np.testing.assert_array_equal(memory, np.array(
        [[np.nan if kept else np.nanmax(both), np.nanmax(both)],
         [np.nan if kept else np.nanmin(both), np.nanmin(both)]], dtype))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_integer_nanmax_is_max(backend, dtype):
    x = np.random.default_rng(6).integers(0, 1000, 50).astype(dtype)
    memory = np.array([[0, 0], [999, 999]], dtype)
    extrema.on(backend)[2, 32](memory, x)
    np.testing.assert_array_equal(memory, [[x.max(), x.max()], [x.min(), x.min()]])


@zm.kernel
def claims(ticket, owner, olds):
    i = zm.grid(1)
    if i < olds.shape[0]:
        olds[i] = zm.atomic.compare_and_swap(ticket, i, i + 1)   # succeeds in thread order
        zm.atomic.cas(owner, (i % 2, i % 3), -1, i)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_compare_and_swap_and_cas_return_the_old_value(backend, dtype):
    n = 40
    ticket, olds = np.zeros(1, dtype), np.zeros(n, dtype)
    owner = np.full((2, 3), -1).astype(dtype)
    claims.on(backend)[2, 32](ticket, owner, olds)
    # threads run in order on the CPU and the interpreter: each finds its predecessor's value
    np.testing.assert_array_equal(olds, np.arange(n))
    assert ticket[0] == n
    first = {}
    for i in range(n):
        first.setdefault((i % 2, i % 3), i)
    np.testing.assert_array_equal(owner, [[first[r, c] for c in range(3)] for r in range(2)])


def signed_inc(a, f, m):
    zm.atomic.inc(a, 0, 1)


def float_and(a, f, m):
    zm.atomic.and_(f, 0, 1.0)


def swap_in_2d(a, f, m):
    zm.atomic.compare_and_swap(m, 0, 1)


@pytest.mark.parametrize("fn,message", [
    (signed_inc, r"atomic.inc works on unsigned integers of 32 or 64 bits, not i32"),
    (float_and, r"atomic.and works on integers of 32 or 64 bits, not f64"),
    (swap_in_2d, r"element 0 of a 1-d array(.|\n)*zm.atomic.cas\(array, index, old, new\)"),
])
def test_atomics_reject_what_numba_rejects(fn, message):
    with pytest.raises(zm.CompileError, match=message) as error:
        zm.kernel(fn)[1, 1](np.zeros(1, np.int32), np.zeros(1), np.zeros((2, 2), np.int32))
    assert "test_numba_intrinsics.py:" in str(error.value)   # names the line


@zm.kernel
def every_atomic(a, f, v, w, old):
    i = zm.grid(1)
    old[0] = zm.atomic.inc(a, 0, v)
    old[1] = zm.atomic.dec(a, 1, v)
    old[2] = zm.atomic.and_(a, 2, v)
    old[3] = zm.atomic.or_(a, 3, v)
    old[4] = zm.atomic.xor(a, 4, v)
    old[5] = zm.atomic.nanmax(a, 5, v)
    old[6] = zm.atomic.nanmin(a, 6, v)
    old[7] = zm.atomic.compare_and_swap(a, v, v + 1)
    f[0] = zm.atomic.max(f, 1, w)
    f[2] = zm.atomic.nanmax(f, 3, w)
    f[4] = zm.atomic.nanmin(f, 5, w)
    s = zm.shared.array(8, zm.u32)
    s[i % 8] = 0
    zm.syncthreads()
    zm.atomic.inc(s, 0, zm.u32(5))
    zm.atomic.dec(s, 1, zm.u32(5))
    zm.atomic.xor(s, 2, zm.u32(5))
    zm.syncthreads()
    old[8] = s[i % 3]


@needs_ptxas
@pytest.mark.parametrize("dtype", [zm.u32, zm.u64])
@pytest.mark.parametrize("ftype", [zm.f32, zm.f64])
def test_atomics_assemble_with_native_instructions(dtype, ftype):
    ptx = assembles(every_atomic, zm.Array(dtype, 1), zm.Array(ftype, 1), dtype, ftype,
                    zm.Array(dtype, 1))
    bits = dtype.bits
    assert f"atom.global.and.b{bits}" in ptx and f"atom.global.or.b{bits}" in ptx
    assert f"atom.global.xor.b{bits}" in ptx and f"atom.global.max.u{bits}" in ptx
    assert "atom.shared.inc.u32" in ptx and "atom.shared.dec.u32" in ptx
    if bits == 32:
        assert "atom.global.inc.u32" in ptx and "atom.global.dec.u32" in ptx


# ---- block votes ---------------------------------------------------------------------------
@zm.kernel
def block_votes(x, out):
    tx, ty = zm.threadIdx.x, zm.threadIdx.y
    i = zm.blockIdx.x * zm.blockDim.x * zm.blockDim.y + ty * zm.blockDim.x + tx
    out[0, i] = zm.syncthreads_count(x[i] > 0)
    out[1, i] = zm.syncthreads_and(x[i] > -40)
    out[2, i] = zm.syncthreads_or(x[i] > 40)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("block", [(32, 1), (5, 7), (64, 3)], ids=str)
def test_block_votes_reduce_over_the_block(backend, block):
    size = block[0] * block[1]
    x = np.random.default_rng(size).integers(-50, 50, 3 * size).astype(np.int32)
    x[:size] = np.abs(x[:size]) % 40      # block 0: all > -40, none > 40
    out = np.zeros((3, len(x)), np.int32)
    block_votes.on(backend)[3, block](x, out)
    per_block = x.reshape(3, size)
    want = np.stack([np.repeat((per_block > 0).sum(1), size),
                     np.repeat((per_block > -40).all(1), size),
                     np.repeat((per_block > 40).any(1), size)]).astype(np.int32)
    np.testing.assert_array_equal(out, want)


@zm.kernel
def drain(work, rounds, seen):
    """Each thread counts its work down; the block goes on while any thread has some left."""
    t = zm.threadIdx.x
    left = work[t]
    n = 0
    while zm.syncthreads_or(left > 0):
        left = left - 1 if left > 0 else left
        n += 1
        seen[t] += zm.syncthreads_count(left > 0)
    rounds[t] = n


@pytest.mark.parametrize("backend", BACKENDS)
def test_block_vote_drives_a_loop(backend):
    work = np.random.default_rng(9).integers(0, 12, 48).astype(np.int32)
    rounds, seen = np.zeros(48, np.int32), np.zeros(48, np.int32)
    drain.on(backend)[1, 48](work, rounds, seen)
    assert (rounds == work.max()).all()
    expected = sum(int((work > k + 1).sum()) for k in range(work.max()))
    assert (seen == expected).all()


@zm.kernel
def shared_flags(x, out):
    flags = zm.shared.array(64, zm.i32)
    t = zm.threadIdx.x
    flags[t] = x[t]
    # the vote is a barrier: every thread's write is seen after it
    total = zm.syncthreads_count(x[t] != 0)
    out[t] = flags[(t + 17) % 64] + total


@pytest.mark.parametrize("backend", BACKENDS)
def test_block_vote_is_a_barrier(backend):
    x = np.random.default_rng(2).integers(0, 3, 64).astype(np.int32)
    out = np.zeros(64, np.int32)
    shared_flags.on(backend)[1, 64](x, out)   # the interpreter's race detector agrees
    np.testing.assert_array_equal(out, np.roll(x, -17) + np.count_nonzero(x))


# ---- warps ---------------------------------------------------------------------------------
@zm.kernel
def warp_exchange(x, out, masks):
    s = zm.shared.array(96, zm.f32)
    t = zm.threadIdx.x
    s[t] = x[t]
    zm.syncwarp()
    out[t] = s[t ^ 1]                    # a neighbour in the same warp, ordered by syncwarp
    lanes, same = zm.match_all_sync(0xFFFFFFFF, t // 32)
    masks[0, t] = zm.match_any_sync(zm.activemask(), x[t])
    masks[1, t] = lanes
    masks[2, t] = zm.selp(same, zm.u32(7), zm.u32(9))
    masks[3, t] = zm.lanemask_lt()


def equal_lanes(values, lane):
    warp = lane - lane % 32
    return sum(1 << k for k in range(32) if values[warp + k] == values[lane])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint64])
def test_syncwarp_match_selp_lanemask(backend, dtype):
    x = np.random.default_rng(4).integers(0, 4, 64).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        x[[0, 1]] = np.nan               # the same bits match
        x[2], x[3] = 0.0, -0.0           # different bits do not
    out, masks = np.zeros(64, np.float32), np.zeros((4, 64), np.uint32)
    warp_exchange.on(backend)[1, 64](x.astype(np.float32), out, masks)
    np.testing.assert_array_equal(out, x.astype(np.float32)[np.arange(64) ^ 1])
    as_f32 = x.astype(np.float32).view(np.uint32)
    assert [int(m) for m in masks[0]] == [equal_lanes(as_f32, t) for t in range(64)]
    np.testing.assert_array_equal(masks[1], 0xFFFFFFFF)
    np.testing.assert_array_equal(masks[2], 7)
    np.testing.assert_array_equal(masks[3], [(1 << (t % 32)) - 1 for t in range(64)])


@zm.kernel
def match_values(x, masks, same):
    t = zm.threadIdx.x
    masks[0, t] = zm.match_any_sync(0xFFFFFFFF, x[t])
    lanes, all_same = zm.match_all_sync(0xFFFFFFFF, x[t])
    masks[1, t] = lanes
    same[t] = all_same


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64, np.float32,
                                   np.float64])
def test_match_on_every_type_numba_takes(backend, dtype):
    x = np.zeros(64, dtype)
    x[:32] = np.random.default_rng(8).integers(0, 3, 32)   # warp 1 holds one value
    if np.issubdtype(dtype, np.floating):
        x[5], x[6] = 0.0, -0.0
    masks, same = np.zeros((2, 64), np.uint32), np.zeros(64, bool)
    match_values.on(backend)[1, 64](x, masks, same)
    bits = x.view(f"u{x.itemsize}")
    assert [int(m) for m in masks[0]] == [equal_lanes(bits, t) for t in range(64)]
    np.testing.assert_array_equal(masks[1], [0] * 32 + [0xFFFFFFFF] * 32)
    np.testing.assert_array_equal(same, [False] * 32 + [True] * 32)


@zm.kernel
def across_warps(x, out):
    s = zm.shared.array(64, zm.f32)
    t = zm.threadIdx.x
    s[t] = x[t]
    zm.syncwarp()
    out[t] = s[(t + 32) % 64]            # another warp's element: syncwarp does not order it


def test_syncwarp_does_not_order_other_warps():
    with pytest.raises(zm.RaceError, match="data race on `s"):
        across_warps.on("interp")[1, 64](np.zeros(64, np.float32), np.zeros(64, np.float32))


def syncwarp_in_one_branch(x):
    t = zm.threadIdx.x
    if t < 16:
        zm.syncwarp()
    x[t] = 1.0        # the other lanes go on (had they exited, the call would be defined)


def test_syncwarp_mask_naming_lanes_that_do_not_call_is_reported():
    with pytest.raises(WarpSyncError, match="names lane 16"):
        zm.kernel(syncwarp_in_one_branch).on("interp")[1, 32](np.zeros(32))


@needs_ptxas
def test_votes_and_matches_assemble_to_single_instructions():
    ptx = assembles(warp_exchange, zm.Array(zm.f32, 1), zm.Array(zm.f32, 1),
                    zm.Array(zm.u32, 2))
    for instruction in ("bar.warp.sync", "match.any.sync.b32", "match.all.sync.b32"):
        assert instruction in ptx
    ptx = assembles(block_votes, zm.Array(zm.i32, 1), zm.Array(zm.i32, 2))
    for instruction in ("bar.red.popc.u32", "bar.red.and.pred", "bar.red.or.pred"):
        assert instruction in ptx
    ptx = assembles(match_values, zm.Array(zm.f64, 1), zm.Array(zm.u32, 2), zm.Array(zm.bool_, 1))
    assert "match.any.sync.b64" in ptx and "match.all.sync.b64" in ptx


# ---- math ----------------------------------------------------------------------------------
EDGES = [0.0, -0.0, 0.5, 1.0, 1.5, 2.5, -2.5, -3.0, 3.7, -0.3, 0.3, 2.675, 171.5, 180.0,
         1e-310, 5e-324, 1e300, -1e300, np.inf, -np.inf, np.nan, -1.25, 7.0, -7.5]


def c_gamma(x):
    try:
        return math.gamma(x)
    except (ValueError, OverflowError):
        return math.copysign(math.inf, x) if x == 0 else math.nan if x < 0 else math.inf


def c_lgamma(x):
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf


def c_remainder(x, y):
    try:
        return math.remainder(x, y)
    except ValueError:
        return math.nan


def numba_round(x, digits):
    """CPython's round(x, n) without its correctly rounded path, as numba runs it on GPUs."""
    if not math.isfinite(x):
        return x
    first, second = (10.0 ** (digits - 22), 1e22) if digits > 22 else (10.0 ** digits, 1.0)
    y = (x * first) * second
    return x if math.isinf(y) else (float(np.rint(y)) / second) / first


@zm.kernel
def unary_math(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        a = x[i]
        out[0, i] = math.gamma(a)
        out[1, i] = math.lgamma(a)
        out[2, i] = math.erfc(a)
        out[3, i] = math.degrees(a)
        out[4, i] = math.radians(a)
        out[5, i] = np.rint(a)
        out[6, i] = round(a, 2)
        out[7, i] = np.round(a, 1)
        out[8, i] = zm.math.gamma(a) if math.isfinite(a) else a


def unary_reference(x):
    """In x's type: math's functions from float64; degrees and radians one product with
    the constant in x's type, as numba (NumPy's float32 loop rounds twice); the rest as
    NumPy computes them."""
    a = [float(v) for v in x]
    as_x = lambda values: np.array(values).astype(x.dtype)   # noqa: E731
    with np.errstate(all="ignore"):
        return np.stack([as_x([c_gamma(v) for v in a]), as_x([c_lgamma(v) for v in a]),
                         as_x([math.erfc(v) for v in a]), x * x.dtype.type(180 / math.pi),
                         x * x.dtype.type(math.pi / 180),
                         np.rint(x), as_x([numba_round(v, 2) for v in a]), np.round(x, 1),
                         as_x([c_gamma(v) if math.isfinite(v) else v for v in a])])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_unary_math_matches_python_with_c_edges(backend, dtype):
    with np.errstate(over="ignore"):
        x = np.array(EDGES + list(np.random.default_rng(7).uniform(-6, 6, 40)), dtype)
    out = np.zeros((9, len(x)), dtype)
    unary_math.on(backend)[2, 32](x, out)
    want = unary_reference(x)
    # libm's gamma and lgamma against Python's own: a few ulps apart, more near lgamma's roots
    tolerance = 1e-13 if dtype == np.float64 else 1e-6
    for row in (0, 1, 2, 8):
        np.testing.assert_allclose(out[row], want[row], rtol=tolerance, atol=tolerance)
    # exact: one rounding of a product, and rounding to integers
    np.testing.assert_array_equal(out[3:8], want[3:8])


def test_round_follows_numba_not_cpython_at_decimal_ties():
    """2.675 is 2.67499999999999982236431605997495353221893310546875; CPython rounds it down,
    numba's GPU round (and zymo's) scales first, and 267.5 ties to 268."""
    out = np.zeros((9, 1))
    unary_math.on("interp")[1, 1](np.array([2.675]), out)
    assert out[6, 0] == 2.68 and round(2.675, 2) == 2.67


@zm.kernel
def split_math(x, y, n, floats, ints):
    i = zm.grid(1)
    if i < x.shape[0]:
        a = x[i]
        fraction, whole = math.modf(a)
        floats[0, i] = fraction
        floats[1, i] = whole
        mantissa, exponent = math.frexp(a)
        floats[2, i] = mantissa
        ints[0, i] = exponent
        floats[3, i] = math.ldexp(a, n[i])
        floats[4, i] = math.nextafter(a, y[i])
        floats[5, i] = math.remainder(a, y[i])
        ints[1, i] = math.isfinite(a)
        ints[2, i] = round(a) if abs(a) < 1e18 else 0     # within an int64
        ints[3, i] = int.bit_count(n[i]) + n[i].bit_count() + zm.popc(n[i])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tuple_and_integer_valued_math_is_exact(backend, dtype):
    rng = np.random.default_rng(11)
    with np.errstate(over="ignore"):
        x = np.array(EDGES + list(rng.uniform(-9, 9, 24)), dtype)
    y = np.array([1.0, 2.0, 0.0, -1.0, np.inf, 1.0, 3.0, np.nan, 0.7, -0.0, 2.0, 3.0]
                 * 4, dtype)[:len(x)]
    n = rng.integers(-1100, 1100, len(x)).astype(np.int32)
    floats, ints = np.zeros((6, len(x)), dtype), np.zeros((4, len(x)), np.int64)
    split_math.on(backend)[2, 32](x, y, n, floats, ints)
    wide = [float(v) for v in x]
    modf = [math.modf(v) for v in wide]
    mantissa, exponent = np.frexp(x)
    with np.errstate(all="ignore"):
        want = np.array([[m[0] for m in modf], [m[1] for m in modf], mantissa,
                         np.ldexp(x, n), np.nextafter(x, y),
                         [c_remainder(float(a), float(b)) for a, b in zip(x, y)]], dtype)
    np.testing.assert_array_equal(floats, want)
    # signs of zero: modf(-0.0) is (-0.0, -0.0), modf(-inf) is (-0.0, -inf)
    assert np.array_equal(np.signbit(floats[:2]), np.signbit(want[:2]))
    np.testing.assert_array_equal(ints[0], exponent)
    np.testing.assert_array_equal(ints[1], np.isfinite(x))
    np.testing.assert_array_equal(ints[2], [round(v) if abs(v) < 1e18 else 0 for v in wide])
    np.testing.assert_array_equal(ints[3], [3 * (int(v) & 0xFFFFFFFF).bit_count() for v in n])


def test_math_takes_numpy_and_zm_names():
    @zm.kernel
    def names(x, out):
        i = zm.grid(1)
        out[0, i] = np.deg2rad(x[i]) - zm.math.radians(x[i])
        out[1, i] = np.rad2deg(x[i]) - zm.math.degrees(x[i])
        out[2, i] = np.isfinite(x[i]) + zm.math.isfinite(x[i])
        out[3, i] = np.around(x[i], decimals=2) - zm.math.rint(x[i] * 100.0) / 100.0

    x = np.array([0.25, -3.5, np.inf, 2.004])
    out = np.zeros((4, 4))
    names.on("interp")[1, 4](x, out)
    np.testing.assert_array_equal(out[:2, [0, 1, 3]], 0.0)
    np.testing.assert_array_equal(out[2], [2, 2, 0, 2])
    np.testing.assert_array_equal(out[3, [0, 1, 3]], 0.0)


def dynamic_digits(x, n):
    x[0] = np.round(x[0], n)


def test_np_round_needs_its_digits_at_compile_time():
    # (Python's round takes a run-time number of digits: tests/frontend/test_round_digits.py)
    with pytest.raises(zm.CompileError, match="number of digits must be known at compile"):
        zm.kernel(dynamic_digits)[1, 1](np.zeros(1), 2)


@needs_ptxas
@pytest.mark.parametrize("dtype", [zm.f32, zm.f64])
def test_math_assembles_with_libdevice(dtype):
    from zymo.backend.nvptx import libdevice
    try:
        libdevice.find()
    except libdevice.LibdeviceNotFoundError:
        pytest.skip("libdevice is not installed")
    ptx = assembles(unary_math, zm.Array(dtype, 1), zm.Array(dtype, 2))
    assert "cvt.rni" in ptx                              # rint: one instruction
    ptx = assembles(split_math, zm.Array(dtype, 1), zm.Array(dtype, 1), zm.Array(zm.i32, 1),
                    zm.Array(dtype, 2), zm.Array(zm.i64, 2))
    assert "call" not in ptx.split(".entry")[1]         # libdevice inlined, frexp inline


# ---- numba's spelling ----------------------------------------------------------------------
cuda = types.SimpleNamespace()   # stands for `from numba import cuda`: zymo reads cuda.X as zm.X


@zm.kernel
def numba_dialect(counters, bits, x, out):
    i = cuda.grid(1)
    cuda.atomic.inc(counters, 0, np.uint32(3))
    cuda.atomic.dec(counters, 1, np.uint32(3))
    cuda.atomic.or_(bits, 0, np.uint32(1) << np.uint32(i))
    cuda.atomic.xor(bits, 1, np.uint32(i))
    cuda.atomic.and_(bits, 2, np.uint32(~(1 << i)))
    cuda.atomic.nanmax(x, 0, x[i + 1])
    out[0, i] = cuda.syncthreads_count(i % 3 == 0)
    out[1, i] = cuda.syncthreads_and(i < 100)
    out[2, i] = cuda.syncthreads_or(i == 5)
    cuda.syncwarp(0xFFFFFFFF)
    out[3, i] = cuda.match_any_sync(cuda.activemask(), i // 8)
    lanes, same = cuda.match_all_sync(0xFFFFFFFF, 1)
    out[4, i] = cuda.selp(same, lanes, 0) ^ cuda.lanemask_lt()
    out[5, i] = round(math.gamma(4.0) + math.lgamma(1.0) + math.erfc(0.0))
    cuda.atomic.compare_and_swap(counters, 0, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_numba_spelling_through_cuda(backend):
    counters, bits = np.array([0, 0], np.uint32), np.array([0, 0, 0xFFFFFFFF], np.uint32)
    x, out = np.zeros(33), np.zeros((6, 32), np.int64)
    x[1:] = np.arange(32.0)
    x[5] = np.nan
    numba_dialect.on(backend)[1, 32](counters, bits, x, out)
    assert list(counters) == [32 % 4, (-32) % 4] and x[0] == 31.0
    assert list(bits) == [0xFFFFFFFF, 0, 0]
    np.testing.assert_array_equal(out[:3], [[11] * 32, [1] * 32, [1] * 32])
    np.testing.assert_array_equal(out[3], [0xFF << (8 * (t // 8)) for t in range(32)])
    np.testing.assert_array_equal(out[4], [0xFFFFFFFF ^ ((1 << t) - 1) for t in range(32)])
    np.testing.assert_array_equal(out[5], 7)


@zm.kernel
def vote_uniform(x, out):
    t = zm.threadIdx.x
    out[t] = zm.eq_sync(0xFFFFFFFF, x[t] > 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_eq_sync_is_true_where_the_warp_agrees(backend):
    x = np.ones(96, np.int32)
    x[32:64] = 0              # the second warp agrees on False
    x[70] = 0                 # the third warp disagrees
    out = np.zeros(96, np.int32)
    vote_uniform.on(backend)[1, 96](x, out)
    np.testing.assert_array_equal(out, [1] * 64 + [0] * 32)


@zm.kernel
def match_all_partial(x, out):
    t = zm.threadIdx.x
    lanes, same = zm.match_all_sync(0xFFFFFFFF, x[t])
    out[t] = lanes if same else 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_match_all_ignores_lanes_a_partial_warp_lacks(backend):
    """A full mask in a block of 10 threads: the 22 lanes that do not exist take no part, as
    on the GPU (where numba's test sees 0b1111111111)."""
    x, out = np.zeros(10, np.int32), np.zeros(10, np.uint32)
    match_all_partial.on(backend)[1, 10](x, out)
    np.testing.assert_array_equal(out, 0x3FF)
    x[1] = 4
    match_all_partial.on(backend)[1, 10](x, out)
    np.testing.assert_array_equal(out, 0)
