"""Reverse mode on the classic GPU-AD cases, against finite differences and closed forms."""
from __future__ import annotations

import io

import numpy as np
import pytest

import zymo as zm
from ad import kernels as K

BACKENDS = ("interp", "cpu")


def dup(a):
    return zm.Duplicated(a, np.zeros_like(a))


def check(kernel, grid, block, *args, backend):
    report = zm.check_grad(kernel, grid, block, *args, backend=backend)
    assert report.ok, str(report)
    return report


@pytest.mark.parametrize("backend", BACKENDS)
def test_square_exp_cos(backend):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, 300)
    check(K.square, 3, 128, dup(x), dup(np.zeros(300)), backend=backend)
    check(K.exp_cos, 3, 128, dup(x), dup(np.zeros(300)), backend=backend)
    # the closed form, float32, through the grad launch itself
    x32 = x.astype(np.float32)
    dx, dy = np.zeros_like(x32), np.ones_like(x32)
    zm.grad(K.square).on(backend)[3, 128](zm.Duplicated(x32, dx),
                                          zm.Duplicated(np.zeros_like(x32), dy))
    np.testing.assert_allclose(dx, 2 * x32, rtol=1e-6)
    assert not dy.any(), "the output cotangent must be consumed"


@pytest.mark.parametrize("backend", BACKENDS)
def test_dense_layer_weights_read_by_every_thread(backend):
    rng = np.random.default_rng(2)
    W, b = rng.standard_normal((5, 7)) * 0.3, rng.standard_normal(5)
    x = rng.standard_normal((70, 7))
    check(K.dense, 2, 64, dup(W), dup(b), dup(x), dup(np.zeros((70, 5))), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_active_scalar_sums_over_threads(backend):
    out, dout = np.zeros(64, np.float32), np.ones(64, np.float32)
    (da,) = zm.grad(K.scale_sum).on(backend)[2, 32](zm.Active(np.float32(3.0)),
                                                   zm.Duplicated(out, dout))
    assert da == 64 * 65 / 2   # sum of 1..64, exactly
    check(K.scale_sum, 2, 32, zm.Active(3.0), dup(np.zeros(64)), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_shared_memory_reduction(backend):
    x = np.random.default_rng(3).standard_normal(500)
    check(K.block_reduce, 4, 128, dup(x), dup(np.zeros(1)), backend=backend)
    dx = np.zeros_like(x)
    zm.grad(K.block_reduce).on(backend)[4, 128](zm.Duplicated(x, dx),
                                               zm.Duplicated(np.zeros(1), np.full(1, 2.0)))
    np.testing.assert_allclose(dx, 4 * x, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_atomics(backend):
    rng = np.random.default_rng(4)
    x = rng.standard_normal(200)
    index = rng.integers(0, 7, 200).astype(np.int32)
    check(K.scatter_add, 2, 128, dup(x), index, dup(np.zeros(7)), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_update(backend):
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(100), rng.standard_normal(100)
    check(K.in_place_axpy, 1, 128, zm.Active(1.5), dup(x), dup(y), backend=backend)
    dx, dy = np.zeros(100), np.ones(100)
    (da,) = zm.grad(K.in_place_axpy).on(backend)[1, 128](
        zm.Active(1.5), zm.Duplicated(x, dx), zm.Duplicated(y.copy(), dy))
    np.testing.assert_allclose(dx, 1.5)
    np.testing.assert_allclose(dy, 1.0)   # y_out = ... + y_in: the cotangent passes through
    np.testing.assert_allclose(da, x.sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_thread_trip_counts(backend):
    rng = np.random.default_rng(6)
    x = rng.uniform(-1, 1, 90)
    counts = rng.integers(0, 6, 90).astype(np.int32)
    check(K.power_loop, 1, 96, dup(x), counts, dup(np.zeros(90)), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_early_exit(backend):
    x = np.random.default_rng(7).uniform(-1, 1, 100)
    check(K.early_exit, 1, 128, dup(x), dup(np.zeros(100)), 0.3, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_overlapping_constant_shifts_gather(backend):
    """x[i] and x[i + 1]: each element is read by two threads; the derivative gathers (each
    thread sums the cotangents of the reads of its own element) instead of using atomics."""
    x = np.random.default_rng(8).standard_normal(257)
    check(K.shifted_neighbours, 3, 128, dup(x), dup(np.zeros(257)), backend=backend)
    spec = zm.grad(K.shifted_neighbours).specialize(dup(x), dup(np.zeros(257)))
    assert "atomic" not in spec.ir() and "memory.update(%dx" in spec.ir()
    assert spec.consume is not None


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_time_shifts_use_atomics(backend):
    x = np.random.default_rng(8).standard_normal(257)
    check(K.shifted_by, 3, 128, dup(x), dup(np.zeros(257)), 3, backend=backend)
    spec = zm.grad(K.shifted_by).specialize(dup(x), dup(np.zeros(257)), 3)
    assert "atomic.add(%dx" in spec.ir() and spec.consume is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_stencil_gather_is_exact_and_consumes_the_seed(backend):
    from corpus.memory import stencil5
    rng = np.random.default_rng(31)
    u, seed = rng.standard_normal((20, 30)), rng.standard_normal((20, 30))
    du, dout = np.zeros_like(u), seed.copy()
    (dalpha,) = zm.grad(stencil5).on(backend)[(2, 3), (16, 8)](
        zm.Duplicated(u, du), zm.Duplicated(np.zeros_like(u), dout), zm.Active(0.2))
    a, inner = 0.2, (slice(1, -1), slice(1, -1))
    expected = seed.copy()                      # the edge copies u
    expected[inner] = seed[inner] * (1 - 4 * a)
    for rows, cols in (((slice(None, -2), slice(1, -1))), ((slice(2, None), slice(1, -1))),
                       ((slice(1, -1), slice(None, -2))), ((slice(1, -1), slice(2, None)))):
        expected[rows, cols] += a * seed[inner]
    lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[inner]
    np.testing.assert_allclose(du, expected, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(dalpha, (seed[inner] * lap).sum(), rtol=1e-12)
    assert not dout.any()                       # consumed by the second kernel
    spec = zm.grad(stencil5).specialize(dup(u), dup(u), zm.Active(0.2))
    assert "atomic.add(%du" not in spec.ir() and "memory.store(%dout" not in spec.ir()
    shown = zm.grad(stencil5).show(dup(u), dup(u), zm.Active(0.2), file=io.StringIO())
    assert "the kernel that consumes the output cotangents" in shown


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("blocks", [3, 4, 8, 5])
def test_the_consuming_kernel_zeroes_exactly_what_the_kernel_stores(backend, blocks):
    """The consuming kernel runs 1/C as many blocks, each doing C of the launch's blocks along x
    (C = 8, 4, 2 or 1 as the grid divides): the seed of every stored element is consumed, the
    one element no thread stores keeps its own."""
    from zymo.ad.gather import coarsening
    rng = np.random.default_rng(33)
    n = blocks * 32
    x, seed = rng.standard_normal(n), rng.standard_normal(n)
    dx, dy = np.zeros_like(x), seed.copy()
    derivative = zm.grad(K.shifted_neighbours).on(backend)
    derivative[blocks, 32](zm.Duplicated(x, dx), zm.Duplicated(np.zeros(n), dy))
    assert derivative.last.consume is not None          # the gather form ran
    assert not dy[:n - 1].any() and dy[n - 1] == seed[n - 1]
    expected = np.zeros(n)
    expected[:n - 1] += seed[:n - 1] * x[1:]
    expected[1:] += seed[:n - 1] * x[:n - 1]
    np.testing.assert_allclose(dx, expected, rtol=1e-14)
    assert coarsening(blocks) == {3: 1, 4: 4, 8: 8, 5: 1}[blocks]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_launch_short_of_a_gathered_array_does_not_gather(backend):
    """A 'valid' convolution launched with one thread per output: no thread owns the last
    input elements, so the gather form would miss their cotangents; the launch takes the
    variant with atomics instead."""
    x = np.random.default_rng(34).standard_normal(64)
    check(K.valid_convolution, 1, 62, dup(x), dup(np.zeros(62)), backend=backend)
    check(K.valid_convolution, 1, 64, dup(x), dup(np.zeros(62)), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nonlinear_stencil_gathers(backend):
    x = np.random.default_rng(32).standard_normal(300)
    check(K.nonlinear_stencil, 3, 128, dup(x), dup(np.zeros(300)), backend=backend)
    assert "atomic" not in zm.grad(K.nonlinear_stencil).specialize(
        dup(x), dup(np.zeros(300))).ir()


def test_gather_needs_one_thread_off_the_stencil_axes():
    """Rows along y all read x: with several threads along y, each element of x gets updates
    from several threads, so the launch takes the all-atomic variant."""
    x = np.random.default_rng(33).standard_normal(100)
    args = (dup(x), dup(np.zeros((3, 100))))
    check(K.rows_of_pairs, (1, 1), (128, 1), *args, backend="interp")
    check(K.rows_of_pairs, (1, 3), (128, 1), *args, backend="interp")
    variants = _variant(K.rows_of_pairs, (1, 3), (128, 1), *args)
    assert list(variants) == [True, False] and "atomic.add(%dx" in variants[False]
    assert "atomic" not in variants[True]


@pytest.mark.parametrize("backend", BACKENDS)
def test_warp_shuffle_reduction(backend):
    x = np.random.default_rng(9).standard_normal(128)
    check(K.warp_sum, 2, 64, dup(x), dup(np.zeros(4)), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_uniform_address_read(backend):
    rng = np.random.default_rng(10)
    w, x = rng.standard_normal(2), rng.standard_normal(300)
    check(K.uniform_read, 3, 128, dup(w), dup(x), dup(np.zeros(300)), backend=backend)
    spec = zm.grad(K.uniform_read).specialize(dup(w), dup(x), dup(np.zeros(300)))
    assert "atomic.accumulate(%private" in spec.ir()   # per block in shared memory, then dw
    assert "memory.update(%dx" in spec.ir()   # x[i]: each thread owns its element
    conservative = zm.grad(K.uniform_read).specialize(dup(w), dup(x), dup(np.zeros(300)),
                                                      plain_updates=False)
    assert "atomic.accumulate(%dw" in conservative.ir()   # warp-aggregated global atomics


def test_all_const_costs_the_primal():
    x = np.zeros(10, np.float32)
    grad_ir = zm.grad(K.square).specialize(x, np.zeros(10, np.float32)).ir()
    primal_ir = K.square.specialize(x, np.zeros(10, np.float32)).ir()
    assert grad_ir == primal_ir


def test_show_prints_the_derivative(capsys):
    x = np.zeros(10)
    text = zm.grad(K.square).show(dup(x), dup(x))
    assert "func.func @square" in text and "%dx" in text
    assert capsys.readouterr().out.strip() == text.strip()


def test_undifferentiable_atomic_is_an_error():
    @zm.kernel
    def running_max(x, out):
        i = zm.grid(1)
        if i < x.shape[0]:
            zm.atomic.max(out, 0, x[i])

    x = np.ones(4)
    with pytest.raises(zm.CompileError, match="cannot differentiate `atomic.max`") as info:
        zm.grad(running_max).specialize(dup(x), dup(np.zeros(1)))
    assert "test_classic.py" in str(info.value)


def test_const_array_holding_active_values_is_an_error():
    @zm.kernel
    def through_temp(x, tmp, y):
        i = zm.grid(1)
        if i < x.shape[0]:
            tmp[i] = x[i] * 2.0
            y[i] = tmp[i] + 1.0

    x = np.ones(4)
    with pytest.raises(zm.CompileError, match="`tmp` is Const"):
        zm.grad(through_temp).specialize(dup(x), np.zeros(4), dup(np.zeros(4)))


def test_wrong_shadow_is_a_launch_error():
    with pytest.raises(zm.LaunchError, match="same shape"):
        zm.grad(K.square)[1, 32](zm.Duplicated(np.zeros(4), np.zeros(5)),
                                 dup(np.zeros(4)))


@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
def test_derivative_ptx_is_accepted_by_ptxas(arch):
    from zymo.backend.nvptx import ptxas
    x32 = np.zeros(64, np.float32)
    cases = [
        (K.square, [dup(x32), dup(x32)]),
        (K.dense, [dup(np.zeros((5, 7))), dup(np.zeros(5)), dup(np.zeros((9, 7))),
                   dup(np.zeros((9, 5)))]),
        (K.block_reduce, [dup(np.zeros(9)), dup(np.zeros(1))]),
        (K.uniform_read, [dup(x32), dup(x32), dup(x32)]),
        (K.warp_sum, [dup(np.zeros(64)), dup(np.zeros(2))]),
        (K.power_loop, [dup(np.zeros(9)), np.zeros(9, np.int32), dup(np.zeros(9))]),
    ]
    for kernel, args in cases:
        ptx = zm.grad(kernel).specialize(*args).ptx(arch)
        report = ptxas.assemble(ptx, arch)
        assert report.spill_stores == 0, f"{kernel.__name__}: {report.log}"


# ---- which reads are owned by one thread (plain shadow updates) ------------------------------
def _variant(kernel, grid, block, *args):
    """The derivative's IR as the launch picks it (the conservative one when the launch breaks
    the plain variant's conditions)."""
    dk = zm.grad(kernel).on("interp")
    dk._specs.clear()   # shared by the kernel's derivatives: only this launch's, in order
    dk[grid, block](*args)
    return {key[3]: spec.ir() for key, spec in dk._specs.items()}


@pytest.mark.parametrize("backend", BACKENDS)
def test_periodic_pull_reads_are_plain_updates(backend):
    rng = np.random.default_rng(21)
    src = rng.standard_normal((5, 4, 8))
    check(K.periodic_pull, (1, 2), (8, 2), dup(src), dup(np.zeros_like(src)), 0.7,
          backend=backend)
    ir = zm.grad(K.periodic_pull).specialize(dup(src), dup(src), 0.7).ir()
    assert "atomic" not in ir
    # one element per q: reads of dsrc and ddst all happen before any store to either
    last_load = max(ir.rindex("memory.load(%dsrc"), ir.rindex("memory.load(%ddst"))
    assert last_load < min(ir.index("memory.store(%dsrc"), ir.index("memory.store(%ddst"))
    variants = _variant(K.periodic_pull, (1, 2), (8, 2), dup(src), dup(np.zeros_like(src)), 0.7)
    assert list(variants) == [True]


@pytest.mark.parametrize("backend", BACKENDS)
def test_periodic_pull_with_more_threads_than_cells_uses_atomics(backend):
    """16 threads along x on 8 cells: two threads read each element, so the launch takes the
    conservative variant (the interpreter's race detector would catch plain updates)."""
    rng = np.random.default_rng(22)
    src = rng.standard_normal((5, 4, 8))
    check(K.periodic_pull, (2, 2), (8, 2), dup(src), dup(np.zeros((5, 4, 16))), 0.7,
          backend=backend)
    variants = _variant(K.periodic_pull, (2, 2), (8, 2), dup(src), dup(np.zeros((5, 4, 16))),
                        0.7)
    assert list(variants) == [True, False] and "atomic.add(%dsrc" in variants[False]


@pytest.mark.parametrize("backend", BACKENDS)
def test_time_varying_offsets_need_a_selector(backend):
    rng = np.random.default_rng(23)
    x = rng.standard_normal(256)
    check(K.rolling_window, 2, 128, dup(x), dup(np.zeros(256)), backend=backend)
    assert "atomic.add(%dx" in zm.grad(K.rolling_window).specialize(
        dup(x), dup(np.zeros(256))).ir()
    a = rng.standard_normal((4, 200))
    check(K.rows_per_step, 2, 128, dup(a), dup(np.zeros(200)), backend=backend)
    ir = zm.grad(K.rows_per_step).specialize(dup(a), dup(np.zeros(200))).ir()
    assert "atomic" not in ir and "chained = true" in ir   # a loop of own updates


def test_chained_own_updates_are_relaxed_atomics_on_the_gpu():
    """In a loop of updates of the thread's own elements, the GPU gets `red` (no load waits on
    the store before it); the CPU keeps load, add, store."""
    a = np.zeros((4, 200), np.float32)
    spec = zm.grad(K.rows_per_step).specialize(dup(a), dup(np.zeros(200, np.float32)))
    assert "atom.global.add.f32" in spec.ptx("sm_90")
    assert "atomicrmw" not in spec.llvm(target="cpu")
    square = zm.grad(K.square).specialize(dup(a[0]), dup(a[0]))
    assert "atom." not in square.ptx("sm_90")     # one update, not in a loop: load, add, store


@pytest.mark.parametrize("backend", BACKENDS)
def test_weights_every_thread_reads_get_a_block_private_shadow(backend):
    """dW and db accumulate in shared memory per block, then one atomic per block and
    element; weights too large for the block's copy take the all-atomic variant."""
    rng = np.random.default_rng(41)
    W, b, x = rng.standard_normal((5, 7)) * 0.3, rng.standard_normal(5), rng.standard_normal(
        (70, 7))
    args = (dup(W), dup(b), dup(x), dup(np.zeros((70, 5))))
    check(K.dense, 2, 64, *args, backend=backend)
    ir = zm.grad(K.dense).specialize(*args).ir()
    assert "memory.shared" in ir and "atomic.accumulate(%private" in ir
    assert "atomic.accumulate(%dW" not in ir
    # dW[j, k], read once per iteration of the uniform k loop: summed over a warp's lanes in
    # a shared tile per chunk of iterations on the GPU (db[j], outside it, is not)
    # (twice: the reverse k loop is versioned on the tile path and the accumulator fitting)
    assert ir.count("atomic.accumulate_in_tile(%private") == 2 and "warp.converged" in ir
    big = (dup(rng.standard_normal((48, 48)) * 0.1), dup(rng.standard_normal(48)),
           dup(rng.standard_normal((20, 48))), dup(np.zeros((20, 48))))
    check(K.dense, 1, 32, *big, backend=backend)
    variants = _variant(K.dense, 1, 32, *big)
    assert list(variants) == [True, False] and "atomic.accumulate(%dW" in variants[False]


@pytest.mark.parametrize("backend", BACKENDS)
def test_static_loops_keep_carried_values_on_a_tape(backend):
    """No replay from the loop's start (O(trips^2)): the forward sweep stores each iteration's
    carried value, the reverse sweep loads it."""
    x = np.random.default_rng(51).uniform(-2, 2, 200)
    check(K.static_power, 2, 128, dup(x), dup(np.zeros(200)), backend=backend)
    ad = zm.grad(K.static_power).specialize(dup(x), dup(np.zeros(200))).ir("ad")
    assert "%tape = memory.local() {dtype = f64, shape = (6)}" in ad
    assert ad.count("control.for") == 2          # the loop and its reverse, no replay loop


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_time_loops_keep_their_first_iterations_on_a_tape(backend):
    """Per-thread trip counts 0..39: the first 32 carried values come from a bounded tape, the
    iterations after them are replayed from the loop's start; both paths are exercised."""
    rng = np.random.default_rng(52)
    x, counts = rng.uniform(-1, 1, 300), rng.integers(0, 40, 300).astype(np.int32)
    check(K.power_loop, 3, 128, dup(x), counts, dup(np.zeros(300)), backend=backend)
    ad = zm.grad(K.power_loop).specialize(dup(x), counts, dup(np.zeros(300))).ir("ad")
    assert "%tape = memory.local() {dtype = f64, shape = (32)}" in ad


def test_global_tape_is_sized_by_the_launch(monkeypatch):
    """The tiled matmul's shared-memory tiles are reloaded per iteration: by default the
    reverse sweep fills each tile again instead of keeping what each thread read (no tape);
    with that off (ZYMO_AD_TILE_REFILL=0), the values go to global tapes ([slot][thread]) the
    launch allocates from the arguments' shapes. A loop whose trip count comes from memory
    cannot be taped: an error."""
    from corpus.shared import matmul_tiled
    from zymo.runtime.grad import tape_bytes_per_thread
    A, B = np.zeros((64, 32), np.float32), np.zeros((32, 48), np.float32)
    args = (dup(A), dup(B), dup(np.zeros((64, 48), np.float32)))
    spec = zm.grad(matmul_tiled).specialize(*args)
    assert not spec.tapes and tape_bytes_per_thread(spec, [A, B, args[2].value]) == 0
    monkeypatch.setenv("ZYMO_AD_TILE_REFILL", "0")
    spec = zm.grad(matmul_tiled).specialize(*args)
    assert len(spec.tapes) >= 1 and "%tape0: array<f32, 1>" in spec.ir("ad")
    # sA[ty, k] and sB[k, tx], each k
    assert tape_bytes_per_thread(spec, [A, B, args[2].value]) == 2 * 32 * 4
    x, lens = np.ones((4, 6)), np.array([6, 3, 0, 5], np.int32)
    with pytest.raises(zm.CompileError, match=r"kernels.py:\d+:\d+: error: the reverse sweep "
                                              r"needs this value again but it reads `out`"):
        zm.grad(K.ragged_softmax).on("interp")[1, 4](dup(x), lens, dup(np.zeros((4, 6))))


@pytest.mark.parametrize("backend", BACKENDS)
def test_stores_of_one_array_read_all_cotangents_first(backend):
    """out[i, 0], out[i, 1], out[i, 2]: the reverse sweep reads every cotangent before it
    zeroes any (each zeroing store would otherwise hold up the next read)."""
    x = np.random.default_rng(81).standard_normal(200)
    check(K.three_outputs, 2, 128, dup(x), dup(np.zeros((200, 3))), backend=backend)
    ir = zm.grad(K.three_outputs).specialize(dup(x), dup(np.zeros((200, 3)))).ir()
    shadow = [line for line in ir.splitlines() if "(%dout" in line]
    loads = [k for k, line in enumerate(shadow) if "memory.load" in line]
    stores = [k for k, line in enumerate(shadow) if "memory.store" in line]
    assert len(loads) == 3 and len(stores) == 3 and max(loads) < min(stores)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inner_loop_updates_of_own_elements_accumulate_per_thread(backend):
    """dx[n, k] += W[j, k] dacc_j for every j: summed in a per-thread array over j and added
    once per element; an inner loop longer than the array falls back to direct updates."""
    rng = np.random.default_rng(91)
    W, b, x = rng.standard_normal((5, 7)) * 0.3, rng.standard_normal(5), rng.standard_normal(
        (70, 7))
    check(K.dense, 2, 64, dup(W), dup(b), dup(x), dup(np.zeros((70, 5))), backend=backend)
    ir = zm.grad(K.dense).specialize(dup(W), dup(b), dup(x), dup(np.zeros((70, 5)))).ir()
    assert "%accumulated = memory.local()" in ir
    W2, x2 = rng.standard_normal((3, 80)) * 0.1, rng.standard_normal((40, 80))
    check(K.dense, 1, 64, dup(W2), dup(rng.standard_normal(3)), dup(x2),
          dup(np.zeros((40, 3))), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_carried_value_folded_to_a_constant_in_a_replayed_loop(backend):
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, 64)
    n = rng.integers(0, 5, 64).astype(np.uint8)
    check(K.folded_carry, 2, 32, dup(x), n, dup(np.zeros(64)), backend=backend)
