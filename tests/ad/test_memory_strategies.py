"""Adversarial kernels for the shadow-update strategies (ownership, batching, gather, private
copies, tapes), each gradient-checked against finite differences; the interpreter's race
detector catches a plain update that two threads make."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import zymo as zm
from ad.planned import read_modes

BACKENDS = ("interp", "cpu")


def dup(a):
    return zm.Duplicated(a, np.zeros_like(a))


def check(kernel, grid, block, *args, backend):
    report = zm.check_grad(kernel, grid, block, *args, backend=backend)
    assert report.ok, str(report)


@zm.kernel
def weighted_stencil(u, w, out, scale):
    """Gather (u) and a block-private copy (w) in one kernel, with an early return."""
    i = zm.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    if 0 < i < n - 1:
        out[i] = scale * (w[0] * u[i - 1] + w[1] * u[i + 1] + w[2] * math.tanh(u[i]))
    else:
        out[i] = u[i]


@zm.kernel
def masked_weights(w, x, y):
    """w[k] is read in a branch of the loop body: not every lane reads it in every iteration,
    so its cotangents are not summed in a tile (`atomic.accumulate_in_tile`)."""
    n = zm.grid(1)
    if n < x.shape[0]:
        acc = 0.0
        for k in range(w.shape[0]):
            if x[n, k] > 0:
                acc += w[k] * x[n, k]
        y[n] = acc


@zm.kernel
def skewed_rows(a, y):
    """Row k read at column (i + k) % n: one element per (k, thread) when n >= threads."""
    i = zm.grid(1)
    n = a.shape[1]
    acc = 0.0
    for k in range(4):
        acc += a[k, (i + k) % n] * (k + 1.0)
    y[i] = acc * acc


@zm.kernel
def read_twice(src, dst):
    """Two reads of one element per iteration: no batching (one read op per array)."""
    i = zm.grid(1)
    if i < src.shape[1]:
        for q in range(3):
            v = src[q, i]
            dst[q, i] = v * src[q, i] + 1.0


@zm.kernel
def triangular(a, out):
    """A triangular static nest overwriting a local array in place, with a branch."""
    i = zm.grid(1)
    if i < a.shape[0]:
        m = zm.local.array(5, zm.f64)
        for k in range(5):
            m[k] = a[i, k]
        for k in range(5):
            for j in range(k + 1, 5):
                if m[k] > 0.0:
                    m[j] = m[j] * m[k] + 0.1
                else:
                    m[j] = m[j] - 0.5 * m[k]
        s = 0.0
        for k in range(5):
            s += m[k]
        out[i] = s


@pytest.mark.parametrize("backend", BACKENDS)
def test_gather_with_private_weights_and_early_return(backend):
    rng = np.random.default_rng(61)
    u, w = rng.standard_normal(300), rng.standard_normal(3)
    check(weighted_stencil, 3, 128, dup(u), dup(w), dup(np.zeros(300)), zm.Active(0.7),
          backend=backend)
    ir = zm.grad(weighted_stencil).specialize(dup(u), dup(w), dup(u), zm.Active(0.7)).ir()
    assert "atomic.accumulate(%private" in ir and "atomic.add(%du" not in ir


@pytest.mark.parametrize("backend", BACKENDS)
def test_skewed_rows_are_owned(backend):
    a = np.random.default_rng(62).standard_normal((4, 256))
    check(skewed_rows, 2, 128, dup(a), dup(np.zeros(256)), backend=backend)
    assert "atomic" not in zm.grad(skewed_rows).specialize(dup(a), dup(np.zeros(256))).ir()


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_reads_of_one_element_per_iteration(backend):
    src = np.random.default_rng(63).standard_normal((3, 200))
    check(read_twice, 2, 128, dup(src), dup(np.zeros((3, 200))), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_triangular_in_place_nest_on_a_tape(backend):
    a = np.random.default_rng(64).standard_normal((100, 5))
    check(triangular, 1, 128, dup(a), dup(np.zeros(100)), backend=backend)


@zm.kernel
def broken_recurrence(x, stop, out):
    """A `range` with a `break` (a while loop to the compiler) whose iterations read a local
    array that later iterations and later code overwrite: the values go on a tape sized by
    the range, the break ending some threads' loops early."""
    i = zm.grid(1)
    if i < x.shape[0]:
        m = zm.local.array(4, zm.f64)
        for k in range(4):
            m[k] = 0.5
        v = x[i]
        for k in range(6):
            if v > stop[i]:
                break
            m[k % 4] = v * v
            v = m[(k + 1) % 4] * m[k % 4] + 0.25 * v
        m[0] = 0.0
        out[i] = v + m[1]


@zm.kernel
def broken_countdown(x, stop, out):
    """A `range` counting down with a `break` (`while not broken and k > 0` to the compiler)
    over a local array each trip overwrites."""
    i = zm.grid(1)
    if i < x.shape[0]:
        m = zm.local.array(3, zm.f64)
        for k in range(3):
            m[k] = 0.25 * k
        v = x[i]
        for k in range(7, 0, -2):
            m[k % 3] = math.sin(v) + m[(k + 1) % 3]
            v = m[k % 3] * v
            if v > stop[i]:
                break
        m[1] = 0.0
        out[i] = v + m[2]


@zm.kernel
def counted_scratch(x, scratch, out):
    """`while w < 3` through a global scratch array written again each trip (other threads'
    rows, read after a barrier), then a range counting down through a local array."""
    i = zm.grid(1)
    t = zm.threadIdx.x
    v = x[i]
    w = 0
    while w < 3:
        w += 1
        scratch[i] = math.sin(v) + 0.5 * v
        zm.syncthreads()
        v = scratch[zm.blockIdx.x * zm.blockDim.x + (t + 1) % zm.blockDim.x] * 0.9
        zm.syncthreads()
    m = zm.local.array(2, zm.f64)
    m[0] = v
    m[1] = 1.0
    for k in range(5, 0, -2):
        m[k % 2] = m[0] * 0.5 + math.cos(m[1])
        v = v * m[1]
    m[0] = 0.0
    m[1] = 0.0
    out[i] = v


@zm.kernel
def never_entered(x, out):
    """A while loop that never runs still compiles its reverse (zero trips, an empty tape)."""
    i = zm.grid(1)
    m = zm.local.array(2, zm.f64)
    m[0] = x[i]
    v = x[i] * 2.0
    w = 0
    while w < 0:
        w += 1
        m[1] = v * v
        v = m[1]
    m[1] = 0.0
    out[i] = v + m[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_with_a_break_keeps_overwritten_values_on_a_tape(backend):
    rng = np.random.default_rng(65)
    x = rng.uniform(0.3, 0.9, 100)
    stop = np.where(rng.random(100) < 0.5, 0.35, 9.0)   # some threads break early
    check(broken_recurrence, 1, 128, dup(x), stop, dup(np.zeros(100)), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_range_counting_down_with_a_break_keeps_its_values(backend):
    rng = np.random.default_rng(68)
    x = rng.uniform(0.5, 1.5, 100)
    stop = np.where(rng.random(100) < 0.5, 0.6, 9.0)
    check(broken_countdown, 1, 128, dup(x), stop, dup(np.zeros(100)), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_counted_while_and_a_range_counting_down_keep_their_values(backend):
    x = np.random.default_rng(66).standard_normal(128)
    check(counted_scratch, 2, 64, dup(x), dup(np.zeros(128)), dup(np.zeros(128)), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_while_loop_that_never_runs(backend):
    x = np.random.default_rng(67).standard_normal(64)
    check(never_entered, 1, 64, dup(x), dup(np.zeros(64)), backend=backend)


@zm.kernel
def long_static_nest(x, out):
    """800 trips of a recurrence through a local array: too many for a thread's tape (512),
    so its values go on a global tape the launch allocates."""
    i = zm.grid(1)
    m = zm.local.array(2, zm.f64)
    m[0] = 0.25
    m[1] = 0.5
    v = x[i]
    for j in range(40):
        for q in range(20):
            m[q % 2] = math.sin(v)
            v = m[(q + 1) % 2] * 0.3 + 0.6 * v + 0.01 * x[i]
    m[0] = 0.0
    out[i] = v


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_static_nest_too_long_for_a_threads_tape_gets_a_global_one(backend):
    x = np.random.default_rng(71).uniform(-0.3, 0.3, 64)
    check(long_static_nest, 1, 64, dup(x), dup(np.zeros(64)), backend=backend)
    spec = zm.grad(long_static_nest).specialize(dup(x), dup(np.zeros(64)))
    assert len(spec.tapes) == 1 and spec.local_tape_bytes == 0


@zm.kernel
def unbounded(x, n, out):
    i = zm.grid(1)
    m = zm.local.array(2, zm.f64)
    m[0] = 0.25
    m[1] = 0.5
    v = x[i]
    j = 0
    while j < n[i]:
        m[j % 2] = v * v
        v = m[(j + 1) % 2] * 0.5 + v
        j += 1
    m[0] = 0.0
    out[i] = v


@zm.kernel
def bounded_as_the_hint_says(x, n, out):
    i = zm.grid(1)
    m = zm.local.array(2, zm.f64)
    m[0] = 0.25
    m[1] = 0.5
    v = x[i]
    for j in range(8):
        if j >= n[i]:
            break
        m[j % 2] = v * v
        v = m[(j + 1) % 2] * 0.5 + v
    m[0] = 0.0
    out[i] = v


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_whose_trips_are_read_from_memory_is_refused_with_the_bound_to_write(backend):
    x = np.random.default_rng(69).uniform(-0.5, 0.5, 32)
    n = np.random.default_rng(70).integers(0, 8, 32).astype(np.int32)
    with pytest.raises(zm.CompileError, match=r"reads `m` \(line \d+\), which is written later"
                       r"(.|\n)*give the loop at line \d+ a bound the compiler can see"):
        zm.grad(unbounded).specialize(dup(x), n, dup(x))
    check(bounded_as_the_hint_says, 1, 32, dup(x), n, dup(np.zeros(32)), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_weights_read_in_a_branch_are_not_tiled(backend):
    rng = np.random.default_rng(83)
    args = (dup(rng.standard_normal(40)), dup(rng.standard_normal((100, 40))),
            dup(np.zeros(100)))
    check(masked_weights, 2, 64, *args, backend=backend)
    ir = zm.grad(masked_weights).specialize(*args).ir("ad")
    assert "atomic.accumulate(%private" in ir and "accumulate_in_tile" not in ir


@zm.kernel
def bounce_or_relax(src, flags, dst):
    """Each cell either copies its values reversed (a wall) or relaxes them (fluid): the two
    stores to `dst` sit in the two branches of one `if`, each in a loop over the cell's
    values, so each thread runs one of them and both batch their adjoints."""
    i = zm.grid(1)
    if i >= flags.shape[0]:
        return
    f = zm.local.array(4, zm.f64)
    s = 0.0
    for q in range(4):
        f[q] = src[q, i]
        s += f[q]
    if flags[i] == 1:
        for q in range(4):
            dst[q, i] = f[3 - q]
    else:
        for q in range(4):
            dst[q, i] = f[q] - 0.3 * (f[q] - 0.25 * s) + 0.1 * math.sin(f[q])


@pytest.mark.parametrize("backend", BACKENDS)
def test_stores_in_exclusive_branches_are_batched(backend):
    rng = np.random.default_rng(84)
    src = rng.standard_normal((4, 300))
    flags = (rng.random(300) < 0.3).astype(np.int32)
    check(bounce_or_relax, 3, 128, dup(src), flags, dup(np.zeros((4, 300))), backend=backend)


def test_batched_branch_stores_read_their_cotangents_before_zeroing():
    """Both branches' store adjoints are batched: the cotangents of a loop's 4 stores are all
    loaded before any is zeroed (4 loads of the output's shadow into a local batch per
    branch)."""
    from zymo.ad import plan as plans
    seen = []
    original = plans._batch_stores

    def spy(activity, forms, writes, loaded, batched, assumed):
        result = original(activity, forms, writes, loaded, batched, assumed)
        seen.append(sorted(batched.values()))
        return result
    plans._batch_stores = spy
    try:
        src = np.zeros((4, 300))
        zm.grad(bounce_or_relax).specialize(dup(src), np.zeros(300, np.int32),
                                            dup(src)).ir()
    finally:
        plans._batch_stores = original
    assert seen and seen[-1].count(4) >= 3, seen   # the read of src and both stores


@zm.kernel
def rows_of_a_tile(a, out):
    """Each block stages a 8x8 tile of `a` in shared memory; thread (i, j) then reads the row
    j of the tile: the 8 threads of a row read the same elements, so their cotangents must not
    be plain updates, although the index is owned along y."""
    tile = zm.shared.array((8, 8), zm.f64)
    i, j = zm.threadIdx.x, zm.threadIdx.y
    b = zm.blockIdx.x
    tile[j, i] = a[b, j, i]
    zm.syncthreads()
    s = 0.0
    for n in range(8):
        s += tile[j, n] * math.cos(tile[j, n] + i)
    out[b, j, i] = s


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_owned_along_fewer_axes_than_the_kernel_uses_is_not_plain(backend):
    """The plain variant does not assume one thread along x (which the kernel's own 8x8
    blocks break): the launch keeps it instead of falling back to the all-atomic variant."""
    from zymo.runtime.grad import activity_of
    a = np.random.default_rng(85).standard_normal((3, 8, 8))
    check(rows_of_a_tile, 3, (8, 8), dup(a), dup(np.zeros((3, 8, 8))), backend=backend)
    call = zm.grad(rows_of_a_tile)[3, (8, 8)].prepare(
        [activity_of(dup(a)), activity_of(dup(np.zeros((3, 8, 8))))])
    assert call.spec.plain_updates and not call.spec.assumptions.single & {"x", "y"}


@zm.kernel
def scattered_in_place(x, out, order):
    """`out[r, c] += ...` at a row and column the thread computes (not provably its own): the
    read before the store is a plain update of the shadow, as the store's adjoint is; with a
    barrier between them, another thread may read the element, and the read stays atomic."""
    t = zm.grid(1)
    p = order[t]
    r, c = p // out.shape[1], p % out.shape[1]
    for k in range(3):
        out[r, c] = out[r, c] * math.cos(x[t, k]) + x[t, k] ** 2
    zm.syncthreads()
    v = out[r, c]
    zm.syncthreads()
    out[r, c] = v * v


def modes_of_out(kernel, *args):
    """(line -> the read modes of `out` there, the derivative's IR)."""
    return read_modes(kernel, *args, keep=lambda op: op.array.name_hint == "out")


def test_in_place_updates_are_plain_updates():
    rng = np.random.default_rng(5)
    x, out = rng.standard_normal((12, 3)), rng.standard_normal((3, 4))
    order = rng.permutation(12).astype(np.int32)
    seen, ir = modes_of_out(scattered_in_place, dup(x), dup(out), order)
    assert sorted(mode for modes in seen.values() for mode in modes) == ["atomic", "plain"] \
        and len(seen) == 2, seen
    # the in-place pair's read stores its cotangent (the store's adjoint zeroed the element)
    assert "memory.update(%dout" not in ir and ir.count("atomic.add(%dout") == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_updates_at_computed_indices(backend):
    rng = np.random.default_rng(5)
    x, out = rng.standard_normal((12, 3)), rng.standard_normal((3, 4))
    order = rng.permutation(12).astype(np.int32)
    check(scattered_in_place, 3, 4, dup(x), dup(out), order, backend=backend)


@zm.kernel
def gathered_squares(a, idx, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = a[idx[i]] * a[idx[i]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_cotangents_make_no_atomics_and_nan_still_reaches_the_shadow(backend,
                                                                         monkeypatch):
    """The reads of `a` at computed indices are atomic updates, made only where the cotangent
    is not zero: the gradient of a seed with zeros (and one NaN) is the reference's."""
    ir = zm.grad(gathered_squares).specialize(
        dup(np.ones(5)), np.zeros(8, np.int32), dup(np.zeros(8))).ir()
    guarded = re.search(r'(%\d+) = arith.cmp\((%\d+), %\d+\) \{predicate = "ne"\}.*\n'
                        r'\s*control.if\(\1\) then \{\n\s*%\d+ = atomic.add\(%da, %\d+, \2\)', ir)
    assert guarded, ir
    rng = np.random.default_rng(6)
    a, idx = rng.standard_normal(5), rng.integers(0, 5, 8).astype(np.int32)
    seed = np.array([1.0, 0.0, 2.0, 0.0, 0.0, -1.0, 0.0, 3.0])
    da = np.zeros(5)
    zm.grad(gathered_squares).on(backend)[2, 4](zm.Duplicated(a, da), idx,
                                                zm.Duplicated(np.zeros(8), seed.copy()))
    expected = np.zeros(5)
    np.add.at(expected, idx, 2 * a[idx] * seed)
    np.testing.assert_allclose(da, expected, rtol=1e-14)
    seed[3] = np.nan
    da = np.zeros(5)
    zm.grad(gathered_squares).on(backend)[2, 4](zm.Duplicated(a, da), idx,
                                                zm.Duplicated(np.zeros(8), seed.copy()))
    assert np.isnan(da[idx[3]]) and np.isfinite(np.delete(da, idx[3])).all()
    monkeypatch.setenv("ZYMO_AD_SKIP_ZERO", "0")
    ir = zm.grad(gathered_squares).specialize(
        dup(np.ones(5)), np.zeros(8, np.int32), dup(np.zeros(8))).ir()
    assert "atomic.add(%da" in ir and 'predicate = "ne"' not in ir


@zm.kernel
def in_place_beside_a_read(x, out, order, cols):
    """`out[r, c] = out[r, c] * out[r, c2] + x`, where c2 may be c: the read of out[r, c2]
    between the in-place pair reaches the same shadow element, so the first read's adjoint
    must add its cotangent, not store it."""
    t = zm.grid(1)
    r = order[t]
    c, c2 = cols[t, 0], cols[t, 1]
    v = out[r, c]
    w = out[r, c2]
    out[r, c] = v * w + x[t]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_in_place_pair_with_a_read_between(backend):
    rng = np.random.default_rng(7)
    out, x = rng.standard_normal((8, 3)), rng.standard_normal(8)
    order = rng.permutation(8).astype(np.int32)
    cols = np.array([[0, 0], [1, 2], [2, 2], [0, 1], [1, 1], [2, 0], [0, 0], [1, 0]], np.int32)
    check(in_place_beside_a_read, 2, 4, dup(x), dup(out), order, cols, backend=backend)


@zm.kernel
def shuffled_in_place(out, order):
    """A warp shuffle between the read and the store back: not an in-place pair (the lanes
    synchronize between the two), so the read stays an atomic update."""
    t = zm.grid(1)
    p = order[t]
    v = out[p]
    w = zm.shfl_down_sync(0xFFFFFFFF, v, 1)
    out[p] = v * w + v


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_warp_collective_between_read_and_store_keeps_the_atomic(backend):
    out = np.random.default_rng(8).standard_normal(32)
    order = np.random.default_rng(9).permutation(32).astype(np.int32)
    check(shuffled_in_place, 1, 32, dup(out), order, backend=backend)
    modes, _ = modes_of_out(shuffled_in_place, dup(out), order)
    assert list(modes.values()) == [{"atomic"}], modes


@zm.kernel
def smooth_out(x, y):
    """y written only, from x's neighbours."""
    i = zm.grid(1)
    if i < y.shape[0]:
        n = x.shape[0]
        y[i] = math.sin(x[i]) * x[(i + 1) % n] + x[(i + n - 1) % n] ** 2


@zm.kernel
def smooth_read_back(x, y):
    """As smooth_out, but reads its own y back: the store is needed."""
    i = zm.grid(1)
    if i < y.shape[0]:
        n = x.shape[0]
        y[i] = math.sin(x[i]) * x[(i + 1) % n]
        y[i] = y[i] * y[i] + x[(i + n - 1) % n]


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_noneed_outputs_are_not_stored(backend):
    """A DuplicatedNoNeed array the kernel never reads: the derivative stores none of its
    primal values (the caller does not want them; the store's adjoint needs only the shadow),
    and the gradient is Duplicated's. One the kernel reads back keeps its stores."""
    rng = np.random.default_rng(11)
    x, seed = rng.standard_normal(300), rng.standard_normal(300)
    grads, outs = {}, {}
    for kind in (zm.Duplicated, zm.DuplicatedNoNeed):
        dx, y = np.zeros(300), np.full(300, 7.0)
        zm.grad(smooth_out).on(backend)[3, 128](zm.Duplicated(x, dx), kind(y, seed.copy()))
        grads[kind], outs[kind] = dx, y
    np.testing.assert_allclose(grads[zm.DuplicatedNoNeed], grads[zm.Duplicated], rtol=1e-14)
    assert not np.all(outs[zm.Duplicated] == 7.0)          # Duplicated: the primal's y
    assert np.all(outs[zm.DuplicatedNoNeed] == 7.0)        # NoNeed: y never written
    args = (dup(x), zm.DuplicatedNoNeed(np.zeros(300), seed))
    assert "memory.store(%y" not in zm.grad(smooth_out).specialize(*args).ir("ad")
    assert "memory.store(%y" in zm.grad(smooth_read_back).specialize(*args).ir("ad")
    report = zm.check_grad(smooth_read_back, 3, 128, dup(x),
                           zm.DuplicatedNoNeed(np.zeros(300), np.zeros(300)), backend=backend)
    assert report.ok, str(report)
