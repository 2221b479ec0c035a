"""Array methods in kernels (issue 27): `a.reshape`, `a.view(dtype)`, `a.real` and `a.imag`
are views (ops/views.py), so writes through them change `a`; `a.copy()` is a new thread-local
array. Values against NumPy on the interpreter and the CPU backend; the alias analyses never
take a view and its array for different memory; the CUDA lowering through ptxas."""
from __future__ import annotations

import numpy as np
import pytest

import zymo as zm
from zymo.backend.nvptx import abi, ptxas
from zymo.diagnostics import CompileError
from zymo.passes.alias import private_arrays

BACKENDS = ("interp", "cpu")
needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas is not installed")


# ---- reshape ------------------------------------------------------------------------------
@zm.kernel
def reshape_2d(a, shape, out):
    y = a.reshape(shape)
    for i in range(y.shape[0]):
        for j in range(y.shape[1]):
            out[i, j] = y[i, j]


@zm.kernel
def reshape_3d(a, shape, out):
    y = a.reshape(shape)
    for i in range(y.shape[0]):
        for j in range(y.shape[1]):
            for k in range(y.shape[2]):
                out[i, j, k] = y[i, j, k]


@zm.kernel
def reshape_literal_and_write(a):
    i = zm.grid(1)
    y = a.reshape(4, -1)          # a view: writing it writes a
    if i < y.shape[0]:
        for j in range(y.shape[1]):
            y[i, j] = y[i, j] * 10 + i


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(4, 6), (8, 3), (-1, 2), (12, -1)])
def test_reshape_reads_like_numpy(backend, shape):
    a = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    want = a.reshape(shape)
    out = np.zeros(want.shape, np.int64)
    reshape_2d.on(backend)[1, 1](a, shape, out)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reshape_to_three_axes_and_empty_arrays(backend):
    a = np.arange(25.0).reshape(5, 5)
    out = np.zeros((5, 1, 5))
    reshape_3d.on(backend)[1, 1](a, (5, -1, 5), out)
    np.testing.assert_array_equal(out, a.reshape(5, 1, 5))
    empty = np.zeros((1, 0, 2))
    reshape_3d.on(backend)[1, 1](np.zeros(0), (1, 0, 2), empty)
    assert empty.shape == (1, 0, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_through_a_reshape_change_the_array(backend):
    a = np.arange(12.0)
    want = (a.reshape(4, 3) * 10 + np.arange(4)[:, None]).ravel()
    reshape_literal_and_write.on(backend)[1, 8](a)
    np.testing.assert_array_equal(a, want)


@zm.kernel
def reshape_local(out):
    i = zm.grid(1)
    q = zm.local.array(6, zm.f64)
    for k in range(6):
        q[k] = k + i
    r = q.reshape((2, 3))
    r[1, 2] = -1.0                 # q[5]
    if i < out.shape[0]:
        out[i] = q[5] + r[0, 1] * 100


@pytest.mark.parametrize("backend", BACKENDS)
def test_reshape_of_a_local_array_is_the_same_memory(backend):
    out = np.zeros(4)
    reshape_local.on(backend)[1, 4](out)
    np.testing.assert_array_equal(out, -1.0 + (1 + np.arange(4)) * 100)


def test_wrong_size_raises_in_a_checked_build():
    a = np.arange(10.0)
    out = np.zeros((3, 3))
    with pytest.raises(ValueError, match="total size of new array must be unchanged"):
        reshape_2d.on("interp")[1, 1](a, (3, 3), out)
    checked = zm.kernel(reshape_2d.py_func, boundscheck=True)
    with pytest.raises(ValueError, match="total size of new array must be unchanged"):
        checked.on("cpu")[1, 1](a, (3, 3), out)


@zm.kernel
def reshape_column(a, out):
    col = a[:, 0]
    y = col.reshape(2, 2)
    out[0] = y[0, 0]


def test_reshape_errors_name_the_line():
    with pytest.raises(CompileError) as info:
        reshape_column.specialize(np.zeros((4, 3)), np.zeros(1))
    (diagnostic,) = info.value.diagnostics
    assert "reshape() of a slice that may not be C-contiguous" in diagnostic.message
    assert "copy" in diagnostic.format() and "col.reshape" in diagnostic.format()
    assert diagnostic.loc.file.endswith("test_array_views.py")
    with pytest.raises(CompileError, match="cannot reshape an array of size 10 into"):
        reshape_bad_literal_local.specialize(np.zeros(1))


@zm.kernel
def reshape_bad_literal_local(out):
    q = zm.local.array(10, zm.f64)
    y = q.reshape(3, 3)
    out[0] = y[0, 0]


@zm.kernel
def rows_as_matrices(a, out):
    """Each thread views its own row: the view's position differs between threads."""
    i = zm.grid(1)
    if i < a.shape[0]:
        m = a[i, :].reshape(2, -1)
        m[1, 0] = m[0, 0] + m[1, 1]
        bits = a[i, 1:].view(np.int64)
        out[i] = bits[0] + m.shape[1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_whose_position_differs_between_threads(backend):
    a = np.arange(24, dtype=np.int64).reshape(4, 6)
    want_a = a.copy()
    want_a[:, 3] = a[:, 0] + a[:, 4]
    want_out = a[:, 1] + 3
    out = np.zeros(4, np.int64)
    rows_as_matrices.on(backend)[1, 8](a, out)
    np.testing.assert_array_equal(a, want_a)
    np.testing.assert_array_equal(out, want_out)


# ---- view(dtype) --------------------------------------------------------------------------
@zm.kernel
def bytes_as_int32(byte_arr, start, stop, out):
    out[0] = byte_arr[start:stop].view(np.int32)[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_of_a_slice_reinterprets_its_bytes(backend):
    byte_arr = np.arange(256, dtype=np.uint8)
    for start in (0, 4, 8, 100, 252):
        out = np.zeros(1, np.int32)
        bytes_as_int32.on(backend)[1, 1](byte_arr, start, start + 4, out)
        assert out[0] == byte_arr[start:start + 4].view(np.int32)[0]


@zm.kernel
def flip_sign_bits(x):
    i = zm.grid(1)
    bits = x.view(np.uint32)
    if i < bits.shape[0]:
        bits[i] = bits[i] ^ np.uint32(0x80000000)


@zm.kernel
def float_bytes(x, out):
    i = zm.grid(1)
    b = x.view(np.uint8)
    if i < b.shape[0]:
        out[i] = b[i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_as_another_dtype_reads_and_writes_the_same_bytes(backend):
    x = np.linspace(-2, 2, 16).astype(np.float32)
    want = -x
    flip_sign_bits.on(backend)[1, 16](x)
    np.testing.assert_array_equal(x, want)
    out = np.zeros(64, np.uint8)
    float_bytes.on(backend)[2, 32](x, out)
    np.testing.assert_array_equal(out, x.view(np.uint8))


@zm.kernel
def view_uneven(a, out):
    out[0] = a.view(np.int32)[0]


def test_view_of_an_uneven_last_axis_raises_in_a_checked_build():
    with pytest.raises(ValueError, match="divisor of the total size in bytes"):
        view_uneven.on("interp")[1, 1](np.zeros(6, np.uint8), np.zeros(1, np.int32))


# ---- real and imag ------------------------------------------------------------------------
@zm.kernel
def add_one_to_real(values):
    i = zm.grid(1)
    zm.atomic.add(values.real, i, 1)


@zm.kernel
def add_one_to_imag(values):
    i = zm.grid(1)
    zm.atomic.add(values.imag, i, 1)


@zm.kernel
def swap_parts(z):
    i = zm.grid(1)
    if i < z.shape[0]:
        re, im = z.real, z.imag
        t = re[i]
        re[i] = im[i]
        im[i] = t


@zm.kernel
def row_parts(z):
    i = zm.grid(1)
    if i < z.shape[0]:
        zm.atomic.add(z[i].imag, 1, 1.0)     # a view of the row, then of its parts


@zm.kernel
def parts_of_slices(z, out):
    i = zm.grid(1)
    row = z[i, 1:]
    if i < z.shape[0]:
        out[i] = row.real[0] + row.imag[row.shape[0] - 1] * 1000 + z.real.shape[1]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_atomics_on_the_parts_of_a_complex_array(backend, dtype):
    z = (np.arange(32) + np.arange(32) * 1j).astype(dtype)
    want = z + 1
    add_one_to_real.on(backend)[1, 32](z)
    np.testing.assert_array_equal(z, want)
    want = z + 1j
    add_one_to_imag.on(backend)[1, 32](z)
    np.testing.assert_array_equal(z, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_parts_are_views_and_slices_keep_them(backend):
    z = np.arange(12) - 3j * np.arange(12)
    want = z.imag + 1j * z.real
    swap_parts.on(backend)[1, 16](z)
    np.testing.assert_array_equal(z, want)
    z = (np.arange(12) + 1j * np.arange(12) ** 2).reshape(3, 4)
    want = z.copy()
    want[:, 1] += 1j
    row_parts.on(backend)[1, 4](z)
    np.testing.assert_array_equal(z, want)
    out = np.zeros(3)
    parts_of_slices.on(backend)[1, 3](z, out)
    np.testing.assert_array_equal(out, z[:, 1].real + z[:, -1].imag * 1000 + 4)


def test_race_detector_sees_parts_of_one_element():
    z = np.zeros(4, np.complex128)
    swap_parts.on("interp")[1, 4](z)     # each thread its own element: no race
    with pytest.raises(zm.RaceError, match="data race"):
        write_real_zero.on("interp")[1, 4](z)


@zm.kernel
def shared_parts(out):
    """Thread i writes the real part of element i and the imaginary part of element i + 1:
    other bytes of the same elements, so no race."""
    i = zm.threadIdx.x
    s = zm.shared.array(8, zm.c128)
    s.real[i] = i
    s.imag[(i + 1) % 8] = -i
    zm.syncthreads()
    out[i] = s[i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_threads_writing_other_parts_of_shared_elements(backend):
    out = np.zeros(8, np.complex128)
    shared_parts.on(backend)[1, 8](out)
    np.testing.assert_array_equal(out, np.arange(8) - 1j * ((np.arange(8) - 1) % 8))


@zm.kernel
def write_real_zero(z):
    i = zm.grid(1)
    z.real[0] = i


# ---- copy ---------------------------------------------------------------------------------
VALUES = np.array([1, 2, 3])[::-1]


@zm.kernel
def copy_constant(out):
    q = VALUES.copy()
    q[0] = 100                     # the copy is the thread's own
    for i in range(len(out)):
        out[i] = q[i] + VALUES[i]


@zm.kernel
def copy_slice(a, out):
    i = zm.grid(1)
    if i < a.shape[0]:
        q = zm.local.array(5, zm.f64)
        for k in range(5):
            q[k] = a[i, k]
        row = q[1:4].copy()
        q[1] = -1.0                # the copy keeps the old value
        out[i] = row[0] + row[1] * 10 + row[2] * 100 + q[1] * 1000


@zm.kernel
def copy_unknown_shape(a, out):
    q = a.copy()
    out[0] = q[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_makes_a_thread_local_array(backend):
    out = np.zeros(3)
    copy_constant.on(backend)[1, 1](out)
    np.testing.assert_array_equal(out, [103, 4, 2])
    a = np.arange(20.0).reshape(4, 5)
    want = a[:, 1] + a[:, 2] * 10 + a[:, 3] * 100 - 1000
    out = np.zeros(4)
    copy_slice.on(backend)[1, 4](a, out)
    np.testing.assert_array_equal(out, want)


def test_copy_of_an_array_of_unknown_shape_is_an_error():
    with pytest.raises(CompileError, match="shape must be known at compile time") as info:
        copy_unknown_shape.specialize(np.zeros(3), np.zeros(1))
    assert "a.copy()" in info.value.diagnostics[0].format()


# ---- views and alias analysis -------------------------------------------------------------
@zm.kernel
def write_real_read_whole(z, out):
    """Thread i writes z.real[i] and reads z[i + 1], which thread i + 1 writes: z must not be
    `noalias` (the accesses are not each thread's own), nor read-only."""
    i = zm.grid(1)
    if i < z.shape[0]:
        z.real[i] = 2.0 * i
    zm.syncthreads()
    if i + 1 < z.shape[0]:
        out[i] = z[i + 1].real


@zm.kernel
def read_through_view(x, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = x.reshape(-1)[i]


def test_a_view_is_the_same_memory_as_its_array():
    z = np.zeros(8, np.complex128)
    out = np.zeros(8)
    spec = write_real_read_whole.specialize(z, out)
    found = private_arrays(spec.codegen.kernel)
    assert 0 not in found.arguments and 0 in found.written
    assert 0 not in abi.read_only_arrays(spec.codegen.kernel)
    # read only through a view: still read-only, so noalias holds
    spec = read_through_view.specialize(np.zeros((2, 4)), np.zeros(8))
    found = private_arrays(spec.codegen.kernel)
    assert 0 in found.arguments and 0 not in found.written
    assert 0 in abi.read_only_arrays(spec.codegen.kernel)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_through_a_part_are_seen_by_reads_of_the_array(backend):
    z = np.full(8, 5 + 7j)
    out = np.zeros(8)
    write_real_read_whole.on(backend)[1, 8](z, out)
    np.testing.assert_array_equal(out[:7], 2.0 * np.arange(1, 8))
    np.testing.assert_array_equal(z, 2.0 * np.arange(8) + 7j)


# ---- derivatives --------------------------------------------------------------------------
@zm.kernel
def scale_through_reshape(x, y):
    i = zm.grid(1)
    v = x.reshape(-1)
    if i < y.shape[0]:
        y[i] = 2.0 * v[i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_reverse_mode_through_a_reshape_of_an_argument(backend):
    """The shadow is reshaped alike; the update through the view is plain (reshape is a
    bijection of a C array's elements)."""
    rng = np.random.default_rng(31)
    x, y = rng.standard_normal((2, 4)), np.zeros(8)
    report = zm.check_grad(scale_through_reshape, 1, 8, zm.Duplicated(x, np.zeros_like(x)),
                           zm.Duplicated(y, rng.standard_normal(8)), backend=backend)
    assert report.ok, str(report)
    ir = zm.grad(scale_through_reshape).specialize(
        zm.Duplicated(x, np.zeros_like(x)), zm.Duplicated(y, np.ones_like(y))).ir()
    assert "%dv = memory.reshape(%dx" in ir and "memory.update(%dv" in ir


@zm.kernel
def slice_as_array(x, y):
    i = zm.grid(1)
    m = x[1, :].reshape((2, 2))
    if i < y.shape[0]:
        y[i] = 2.0 * m[i // 2, i % 2]


@zm.kernel
def reshape_in_a_branch(x, y):
    i = zm.grid(1)
    if i < y.shape[0]:
        v = x.reshape(-1)
        y[i] = 2.0 * v[i]


@zm.kernel
def reshape_and_array(x, y):
    i = zm.grid(1)
    v = x.reshape(-1)
    if i < y.shape[0]:
        y[i] = v[i] * x[i // 4, i % 4]


def test_views_reverse_mode_refuses_are_errors_at_their_lines():
    x, y = np.ones((2, 4)), np.zeros(4)
    args = (zm.Duplicated(x, np.zeros_like(x)), zm.Duplicated(y, np.ones_like(y)))
    with pytest.raises(CompileError, match="cannot differentiate `memory.subview`: the "
                       "reverse-mode derivative through a slice") as info:
        zm.grad(slice_as_array).specialize(*args)
    assert "test_array_views.py" in str(info.value) and "x[1, :]" in str(info.value)
    assert "forward mode (zm.jvp) is" in str(info.value) and "2 errors" not in str(info.value)
    with pytest.raises(CompileError, match="taken at the top of the kernel") as info:
        zm.grad(reshape_in_a_branch).specialize(*args)
    assert "x.reshape(-1)" in str(info.value)
    with pytest.raises(CompileError, match="through two different views") as info:
        zm.grad(reshape_and_array).specialize(*args)
    assert "hint: take one view" in str(info.value)


@zm.kernel
def read_then_clear_through_view(x, a, y):
    """`a` (not differentiated) is read through a view, then cleared directly: the reverse
    sweep must not read the view again for t (it would find the zeros)."""
    i = zm.grid(1)
    v = a.reshape(-1)
    if i < y.shape[0]:
        t = v[i]
        y[i] = x[i] * x[i] * t
        a[i // 4, i % 4] = 0.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_to_an_array_are_seen_by_reads_through_its_view_in_reverse(backend):
    rng = np.random.default_rng(32)
    x, a, w = rng.standard_normal(8), rng.standard_normal((2, 4)), rng.standard_normal(8)
    dx = np.zeros(8)
    zm.grad(read_then_clear_through_view.on(backend))[1, 8](
        zm.Duplicated(x, dx), a.copy(), zm.Duplicated(np.zeros(8), w.copy()))
    np.testing.assert_allclose(dx, 2 * x * a.reshape(-1) * w, rtol=1e-13)


@zm.kernel
def rows_through_views(x, w, y):
    """Each thread reads its row of x as a 2 x (n/2) matrix (a slice taken as an array, then
    a reshape) and writes through a reshape of y."""
    i = zm.grid(1)
    out = y.reshape(-1)
    if i < out.shape[0]:
        m = x[i, :].reshape(2, -1)
        acc = 0.0
        for r in range(2):
            for c in range(m.shape[1]):
                acc += w[r, c] * m[r, c] * m[r, c]
        out[i] = acc


def rows_args(rng):
    return (zm.Duplicated(rng.random((5, 6)), np.zeros((5, 6))),
            zm.Duplicated(rng.random((2, 3)), np.zeros((2, 3))),
            zm.Duplicated(np.zeros((5, 1)), np.zeros((5, 1))))


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_mode_through_slices_and_reshapes_matches_finite_differences(backend):
    report = zm.check_jvp(rows_through_views, 1, 5, *rows_args(np.random.default_rng(4)),
                          width=2, backend=backend)
    assert report.ok, report
    # and against the closed form: d y_i = sum_rc dw[r,c] m^2 + 2 w[r,c] m dm
    x, w, y = rows_args(np.random.default_rng(5))
    dx, dw = np.random.default_rng(6).random((5, 6)), np.random.default_rng(7).random((2, 3))
    zm.jvp(rows_through_views).on(backend)[1, 5](
        zm.Duplicated(x.value, dx), zm.Duplicated(w.value, dw), y)
    m, dm = x.value.reshape(5, 2, 3), dx.reshape(5, 2, 3)
    np.testing.assert_allclose(y.value[:, 0], (w.value * m * m).sum(axis=(1, 2)))
    np.testing.assert_allclose(y.shadow[:, 0],
                               (dw * m * m + 2 * w.value * m * dm).sum(axis=(1, 2)))


@zm.kernel
def weights_through_views(x, c, y):
    i = zm.grid(1)
    w = c.reshape(-1)
    if i < y.shape[0]:
        y[i] = x[i] * w[i] + c.real[0, 1]


@zm.kernel
def varied_into_const_view(x, tmp, y):
    i = zm.grid(1)
    if i < y.shape[0]:
        flat = tmp.reshape(-1)
        flat[i] = x[i] * 2.0
        y[i] = tmp[0, i] + 1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_of_arrays_without_derivatives_differentiate(backend):
    rng = np.random.default_rng(3)
    x, c = rng.random(4), rng.random((2, 2))
    dx = np.zeros(4)
    zm.grad(weights_through_views).on(backend)[1, 4](
        zm.Duplicated(x, dx), c, zm.Duplicated(np.zeros(4), np.ones(4)))
    np.testing.assert_allclose(dx, c.ravel())
    ty = np.zeros(4)
    zm.jvp(weights_through_views).on(backend)[1, 4](
        zm.Duplicated(x, np.ones(4)), c, zm.Duplicated(np.zeros(4), ty))
    np.testing.assert_allclose(ty, c.ravel())


def test_a_const_array_filled_through_a_view_is_an_error():
    with pytest.raises(CompileError, match="array `tmp` is Const but stores values"):
        zm.grad(varied_into_const_view).specialize(
            zm.Duplicated(np.ones(4), np.zeros(4)), np.zeros((1, 4)),
            zm.Duplicated(np.zeros(4), np.ones(4)))


# ---- CUDA ---------------------------------------------------------------------------------
@needs_ptxas
def test_views_assemble_for_the_gpu():
    z = np.zeros(32, np.complex128)
    kernels = [
        (reshape_2d, (np.zeros(24), (4, 6), np.zeros((4, 6)))),
        (reshape_local, (np.zeros(4),)),
        (bytes_as_int32, (np.zeros(16, np.uint8), 0, 4, np.zeros(1, np.int32))),
        (flip_sign_bits, (np.zeros(4, np.float32),)),
        (float_bytes, (np.zeros(4, np.float32), np.zeros(16, np.uint8))),
        (add_one_to_real, (z,)),
        (add_one_to_imag, (z.astype(np.complex64),)),
        (parts_of_slices, (np.zeros((3, 4), np.complex128), np.zeros(3))),
        (copy_slice, (np.zeros((4, 5)), np.zeros(4))),
        (write_real_read_whole, (z, np.zeros(32))),
        (zm.jvp(rows_through_views), rows_args(np.random.default_rng(0))),
    ]
    for kernel, args in kernels:
        ptx = kernel.specialize(*args).ptx("sm_80")
        ptxas.assemble(ptx, "sm_80")
        if kernel in (add_one_to_real, add_one_to_imag):
            assert "atom.global.add.f" in ptx or "red.global.add.f" in ptx
