"""The interpreter reports data races and out-of-bounds accesses; the CPU backend reports
out-of-bounds accesses when built with boundscheck=True. Messages name the array, and the
source line of the access (marked below with `# <- NAME` comments)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import zymo as zm

SOURCE = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> int:
    """The 1-based line number of the line ending with `# <- marker`."""
    hits = [n for n, text in enumerate(SOURCE, 1) if text.rstrip().endswith(f"# <- {marker}")]
    assert len(hits) == 1, f"marker {marker!r} found {len(hits)} times"
    return hits[0]


def _without_source(message: str) -> str:
    """The message less the lines that echo this file's source (they would match anything)."""
    source = {text.strip() for text in SOURCE if text.strip()}
    return "\n".join(text for text in message.splitlines() if text.strip() not in source)


def mentions_line(message: str, line: int) -> bool:
    return re.search(rf"(?<!\d){line}(?!\d)", _without_source(message)) is not None


def mentions_name(message: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", _without_source(message)) is not None


def interp(kernel):
    return kernel.on("interp")


# ---- racy kernels ----------------------------------------------------------------------------
@zm.kernel
def race_shared_write_write(out):
    sbuf = zm.shared.array(1, zm.i32)
    sbuf[0] = zm.threadIdx.x  # <- shared-ww
    zm.syncthreads()
    if zm.threadIdx.x == 0:
        out[0] = sbuf[0]


@zm.kernel
def race_global_write_write(target):
    target[0] = zm.threadIdx.x  # <- global-ww


@zm.kernel
def race_global_across_blocks(target):
    if zm.threadIdx.x == 0:
        target[0] = zm.blockIdx.x  # <- blocks-ww


@zm.kernel
def race_shared_write_read(x, out):
    sbuf = zm.shared.array(64, zm.f32)
    t = zm.threadIdx.x
    sbuf[t] = x[t]  # <- shared-w
    v = sbuf[(t + 1) % 64]  # <- shared-r
    zm.syncthreads()
    out[t] = v


@zm.kernel
def race_global_read_write(vec):
    t = zm.threadIdx.x
    if t + 1 < vec.shape[0]:
        v = vec[t + 1]  # <- global-r
    else:
        v = 0.0
    vec[t] = v  # <- global-w


# ---- the same kernels made correct -----------------------------------------------------------
@zm.kernel
def shared_write_barrier_read(x, out):
    s = zm.shared.array(64, zm.f32)
    t = zm.threadIdx.x
    s[t] = x[t]
    zm.syncthreads()
    out[t] = s[(t + 1) % 64]


@zm.kernel
def shared_single_writer(out):
    s = zm.shared.array(1, zm.i32)
    if zm.threadIdx.x == 5:
        s[0] = 42
    zm.syncthreads()
    out[zm.threadIdx.x] = s[0]


@zm.kernel
def shared_reuse_across_barriers(x, out):
    s = zm.shared.array(64, zm.f32)
    t = zm.threadIdx.x
    s[t] = x[t]
    zm.syncthreads()
    v = s[63 - t]
    zm.syncthreads()
    s[t] = v * 2.0  # overwrites what another thread read, after a barrier
    zm.syncthreads()
    out[t] = s[(t + 7) % 64]


@zm.kernel
def own_element_and_broadcast_reads(x, out):
    t = zm.grid(1)
    out[t] = x[0]  # every thread reads x[0]: reads never race
    out[t] = out[t] + x[t]  # a thread rereads and rewrites its own element


@zm.kernel
def atomics_do_not_race(counts, total):
    s = zm.shared.array(1, zm.i32)
    if zm.threadIdx.x == 0:
        s[0] = 0
    zm.syncthreads()
    zm.atomic.add(s, 0, 1)
    zm.atomic.add(counts, zm.threadIdx.x % 4, 1)
    zm.syncthreads()
    if zm.threadIdx.x == 0:
        zm.atomic.add(total, 0, s[0])


RACES = [  # kernel, grid, block, make args, array name, markers of the offending accesses
    (race_shared_write_write, 1, 32, lambda: [np.zeros(1, np.int32)], "sbuf", ["shared-ww"]),
    (race_global_write_write, 1, 32, lambda: [np.zeros(1, np.int32)], "target", ["global-ww"]),
    (race_global_across_blocks, 2, 1, lambda: [np.zeros(1, np.int32)], "target",
     ["blocks-ww"]),
    (race_shared_write_read, 1, 64,
     lambda: [np.arange(64, dtype=np.float32), np.zeros(64, np.float32)], "sbuf",
     ["shared-w", "shared-r"]),
    (race_global_read_write, 1, 64, lambda: [np.arange(64, dtype=np.float32)], "vec",
     ["global-r", "global-w"]),
]


@pytest.mark.parametrize("kernel, grid, block, make, name, markers", RACES,
                         ids=["shared-write-write", "global-write-write", "across-blocks",
                              "shared-write-read", "global-read-write"])
def test_interpreter_reports_race(kernel, grid, block, make, name, markers):
    with pytest.raises(zm.RaceError) as excinfo:
        interp(kernel)[grid, block](*make())
    message = str(excinfo.value)
    assert mentions_name(message, name), message
    lines = [line_of(m) for m in markers]
    assert any(mentions_line(message, line) for line in lines), (lines, message)


def test_race_free_versions_run():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    interp(shared_write_barrier_read)[1, 64](x, out)
    np.testing.assert_array_equal(out, np.roll(x, -1))

    out = np.zeros(32, np.int32)
    interp(shared_single_writer)[1, 32](out)
    np.testing.assert_array_equal(out, 42)

    out = np.zeros(64, np.float32)
    interp(shared_reuse_across_barriers)[1, 64](x, out)
    np.testing.assert_array_equal(out, 2 * x[::-1][(np.arange(64) + 7) % 64])

    x = np.arange(1, 129, dtype=np.float32)
    out = np.zeros(128, np.float32)
    interp(own_element_and_broadcast_reads)[2, 64](x, out)
    np.testing.assert_array_equal(out, x + 1)


def test_atomics_do_not_race():
    counts = np.zeros(4, np.int32)
    total = np.zeros(1, np.int32)
    interp(atomics_do_not_race)[3, 64](counts, total)
    np.testing.assert_array_equal(counts, [48, 48, 48, 48])
    np.testing.assert_array_equal(total, [192])


# ---- races through memory that several arrays see ------------------------------------------
# The detector keys its state by address: views of one buffer, the same array twice, and other
# dtypes over the same bytes all see each other's accesses.
@zm.kernel
def double_into(a, b):
    i = zm.grid(1)
    if i < a.shape[0]:
        a[i] = b[i] * 2  # <- alias-w


@zm.kernel
def write_then_read_neighbour(a, b, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        a[i] = 1  # <- dtype-w
        out[i] = b[i + 1]  # <- dtype-r


@zm.kernel
def write_column_read_row(m, mt):
    i = zm.grid(1)
    if i + 1 < m.shape[0]:
        m[i, 0] = 1.0  # <- transposed-w
        x = mt[0, i + 1]  # <- transposed-r
        if x > 100.0:
            m[i, 1] = x


@zm.kernel
def count_twice(a, b):
    zm.atomic.add(a, 0, 1)
    zm.atomic.add(b, 0, 1)


def test_shifted_views_of_one_buffer_race():
    base = np.arange(65, dtype=np.float32)
    with pytest.raises(zm.RaceError) as excinfo:
        interp(double_into)[1, 64](base[:-1], base[1:])
    message = str(excinfo.value)
    assert mentions_line(message, line_of("alias-w")), message
    assert "memory shared with" in message, message


def test_one_array_passed_twice_as_fresh_views_races():
    base = np.arange(64, dtype=np.float32)
    with pytest.raises(zm.RaceError):
        interp(write_then_read_neighbour)[1, 63](base[:], base[:], np.zeros(63, np.float32))


@pytest.mark.parametrize("view", ["int32", "float64"])
def test_other_dtypes_over_the_same_bytes_race(view):
    """Thread i writes element i as f32 (int32: the same 4 bytes; float64: one of the two
    f32 elements its 8 bytes cover), and thread i + 1 reads those bytes."""
    base = np.zeros(130, np.float32)
    if view == "int32":
        a, b, n = base, base.view(np.int32), 64
    else:
        a, b, n = base.view(np.float64), base[1:129], 64
    with pytest.raises(zm.RaceError) as excinfo:
        interp(write_then_read_neighbour)[1, n](a, b, np.zeros(n, b.dtype))
    message = str(excinfo.value)
    assert any(mentions_line(message, line_of(m)) for m in ("dtype-w", "dtype-r")), message


def test_a_transposed_view_races_with_its_array():
    m = np.zeros((64, 4), np.float32)
    with pytest.raises(zm.RaceError) as excinfo:
        interp(write_column_read_row)[1, 64](m, m.T)
    message = str(excinfo.value)
    assert any(mentions_line(message, line_of(m)) for m in ("transposed-w", "transposed-r"))


def test_views_of_disjoint_bytes_do_not_race():
    base = np.arange(128, dtype=np.float32)
    interp(double_into)[1, 64](base[:64], base[64:])                 # two halves
    np.testing.assert_array_equal(base[:64], 2 * np.arange(64, 128))
    base = np.arange(128, dtype=np.float32)
    interp(double_into)[1, 64](base[0::2], base[1::2])               # interleaved
    np.testing.assert_array_equal(base[0::2], 2 * np.arange(1, 128, 2))
    big = np.zeros((3000, 1000), np.float32)                         # columns of a big matrix
    big[:, 4] = 1
    interp(double_into)[47, 64](big[:, 3], big[:, 4])
    np.testing.assert_array_equal(big[:, 3], 2)
    with pytest.raises(zm.RaceError):                               # and one column, shifted
        interp(double_into)[47, 64](big[:-1, 3], big[1:, 3])


def test_atomics_through_two_views_do_not_race():
    counts = np.zeros(1, np.int32)
    interp(count_twice)[2, 32](counts, counts[:])
    np.testing.assert_array_equal(counts, [128])


# ---- out of bounds ----------------------------------------------------------------------------
def _read_past_end(xin, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = xin[2 * i + 1]  # <- oob-read


def _write_2d(mat):
    i, j = zm.grid(2)
    if i <= mat.shape[1] and j < mat.shape[0]:  # `<=`: one column too many
        mat[j, i] = 1.0  # <- oob-write


def _shared_past_end(out):
    sbuf = zm.shared.array(32, zm.f32)
    t = zm.threadIdx.x
    sbuf[t] = 1.0  # <- oob-shared
    zm.syncthreads()
    out[t] = sbuf[t]


read_past_end = zm.kernel(_read_past_end)
write_2d = zm.kernel(_write_2d)
shared_past_end = zm.kernel(_shared_past_end)

read_past_end_checked = zm.kernel(_read_past_end, boundscheck=True)
write_2d_checked = zm.kernel(_write_2d, boundscheck=True)


@zm.kernel(boundscheck=True)
def read_past_end_decorated(x, out):
    i = zm.grid(1)
    if i < out.shape[0]:
        out[i] = x[2 * i + 1]


@zm.kernel(boundscheck=True)
def in_bounds_checked(x, out):
    i = zm.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] + 1.0


def test_interpreter_reports_read_out_of_bounds():
    x = np.zeros(20, np.float32)
    out = np.zeros(16, np.float32)  # threads 10..15 read x[21], x[23], ..., x[31]
    with pytest.raises(zm.BoundsError) as excinfo:
        interp(read_past_end)[1, 16](x, out)
    message = str(excinfo.value)
    assert mentions_name(message, "xin"), message
    assert any(mentions_line(message, n) for n in range(21, 32, 2)), message  # the index
    assert mentions_line(message, 20), message  # the shape
    assert mentions_line(message, line_of("oob-read")), message


def test_interpreter_reports_write_out_of_bounds_2d():
    m = np.zeros((5, 7), np.float32)
    with pytest.raises(zm.BoundsError) as excinfo:
        interp(write_2d)[(1, 1), (8, 8)](m)
    message = str(excinfo.value)
    assert mentions_name(message, "mat"), message
    assert mentions_line(message, 7) and mentions_line(message, 5), message  # index 7; (5, 7)
    assert mentions_line(message, line_of("oob-write")), message


def test_interpreter_reports_shared_out_of_bounds():
    out = np.zeros(40, np.float32)
    with pytest.raises(zm.BoundsError) as excinfo:
        interp(shared_past_end)[1, 40](out)
    message = str(excinfo.value)
    assert mentions_name(message, "sbuf"), message
    assert mentions_line(message, 32), message
    assert mentions_line(message, line_of("oob-shared")), message


def test_bounds_error_is_an_index_error():
    assert issubclass(zm.BoundsError, IndexError)


@pytest.mark.parametrize("kernel", [read_past_end_checked, read_past_end_decorated],
                         ids=["kernel(fn, boundscheck=True)", "@kernel(boundscheck=True)"])
def test_cpu_boundscheck_read(kernel):
    x = np.zeros(20, np.float32)
    out = np.zeros(16, np.float32)
    with pytest.raises(zm.BoundsError):
        kernel.on("cpu")[1, 16](x, out)


def test_cpu_boundscheck_write_2d():
    m = np.zeros((5, 7), np.float32)
    with pytest.raises(zm.BoundsError):
        write_2d_checked.on("cpu")[(1, 1), (8, 8)](m)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_boundscheck_passes_in_bounds_kernels(backend):
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(100, np.float32)
    in_bounds_checked.on(backend)[4, 32](x, out)
    np.testing.assert_array_equal(out, x + 1)
