"""zm.jax.function: zymo kernels as JAX primitives lowered to XLA FFI custom calls, on the CPU:
values against NumPy inside jax.jit, gradients against float64 central differences and
jax.test_util.check_grads (forward and reverse), vmap, the lowered program (a custom call to
zymo's target, no Python callback, no Python run by the compiled call), the handler's view of
XLA's C structures against the installed header, and the example run as a user would."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import zymo as zm  # noqa: E402
from interop.kernels import dense_tanh, polar, scaled_sine, sum_of_squares  # noqa: E402
from zymo.interop import xla_ffi  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _blocks(n, threads=64):
    return ((n + threads - 1) // threads, threads)


@zm.kernel
def shifted(x, n, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = x[(i + n) % x.shape[0]] * x[i]


@zm.kernel
def writes_its_input(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        x[i] = 0.0
        y[i] = 1.0


TILE = 8


@zm.kernel
def matmul_tiled(A, B, C):
    sA = zm.shared.array((TILE, TILE), zm.f32)
    sB = zm.shared.array((TILE, TILE), zm.f32)
    tx, ty = zm.threadIdx.x, zm.threadIdx.y
    row, col = zm.blockIdx.y * TILE + ty, zm.blockIdx.x * TILE + tx
    acc = 0.0
    for t in range((A.shape[1] + TILE - 1) // TILE):
        ka, kb = t * TILE + tx, t * TILE + ty
        sA[ty, tx] = A[row, ka] if row < A.shape[0] and ka < A.shape[1] else 0.0
        sB[ty, tx] = B[kb, col] if kb < A.shape[1] and col < B.shape[1] else 0.0
        zm.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        zm.syncthreads()
    if row < A.shape[0] and col < B.shape[1]:
        C[row, col] = acc


@zm.kernel
def neighbours(x, y):
    i = zm.grid(1)
    if i + 1 < x.shape[0]:
        y[i] = x[i] * x[i + 1]


sine = zm.jax.function(scaled_sine, lambda x, a: _blocks(x.shape[0]), outputs={"y": "x"},
                       scalars=["a"])
squares = zm.jax.function(sum_of_squares, lambda x, w: _blocks(x.shape[0]),
                          outputs={"total": zm.jax.Output((1,))})
polar_fn = zm.jax.function(polar, lambda x, y: _blocks(x.shape[0]),
                           outputs={"r2": "x", "q": "x"})
dense = zm.jax.function(
    dense_tanh, lambda x, w, b: (((x.shape[0] + 7) // 8, (w.shape[1] + 7) // 8), (8, 8)),
    outputs={"y": lambda x, w, b: (x.shape[0], w.shape[1])})
shift = zm.jax.function(shifted, lambda x, n: _blocks(x.shape[0]), outputs={"y": "x"},
                        scalars={"n": int})

matmul = zm.jax.function(
    matmul_tiled,
    lambda a, b: (((b.shape[1] + TILE - 1) // TILE, (a.shape[0] + TILE - 1) // TILE),
                  (TILE, TILE)),
    outputs={"C": lambda a, b: (a.shape[0], b.shape[1])})
pairs = zm.jax.function(neighbours, lambda x: _blocks(x.shape[0], 32), outputs={"y": "x"})


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


def _central_differences(f, args, argnum, eps=1e-6):
    """d sum(f(args)) / d args[argnum], element by element."""
    x = np.array(args[argnum], dtype=np.float64)
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        values = []
        for step in (eps, -eps):
            moved = x.copy()
            moved[index] += step
            call = list(args)
            call[argnum] = moved
            values.append(float(np.sum(np.asarray(f(*call)))))
        grad[index] = (values[0] - values[1]) / (2 * eps)
    return grad


def test_values_match_numpy_inside_jit():
    x, w = _rand(37), _rand(37, seed=1)
    np.testing.assert_allclose(jax.jit(sine, static_argnums=1)(x, 1.5), 1.5 * np.sin(x) * x,
                               rtol=1e-14)
    np.testing.assert_allclose(jax.jit(squares)(x, w), [np.sum(w * x * x)], rtol=1e-12)
    r2, q = jax.jit(polar_fn)(x, w)
    np.testing.assert_allclose(r2, x * x + w * w, rtol=1e-14)
    np.testing.assert_allclose(q, x * w - w, rtol=1e-14)
    xs, ws, bs = _rand(5, 4), _rand(4, 3, seed=1), _rand(3, seed=2)
    np.testing.assert_allclose(jax.jit(dense)(xs, ws, bs), np.tanh(xs @ ws + bs), rtol=1e-13)
    np.testing.assert_allclose(jax.jit(shift, static_argnums=1)(x, 3), np.roll(x, -3) * x,
                               rtol=1e-14)
    x32 = x.astype(np.float32)
    got = jax.jit(sine, static_argnums=1)(x32, 0.5)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, 0.5 * np.sin(x32) * x32, rtol=1e-6)
    # outside jit the primitive runs the same compiled call
    np.testing.assert_allclose(sine(x, 2.0), 2.0 * np.sin(x) * x, rtol=1e-14)


@pytest.mark.parametrize("case", ["elementwise", "atomics", "two_outputs", "dense", "shift"])
def test_gradients_match_central_differences(case):
    if case == "elementwise":
        fn, args = (lambda x: sine(x, 0.7)), (_rand(41),)
    elif case == "atomics":
        fn, args = squares, (_rand(30), _rand(30, seed=3))
    elif case == "two_outputs":
        fn, args = (lambda x, y: sum(polar_fn(x, y))), (_rand(33), _rand(33, seed=5))
    elif case == "dense":
        fn, args = dense, (_rand(6, 5), _rand(5, 4, seed=6), _rand(4, seed=7))
    else:
        fn, args = (lambda x: shift(x, 5)), (_rand(23),)
    loss = jax.jit(jax.grad(lambda *a: jnp.sum(fn(*a)), argnums=tuple(range(len(args)))))
    grads = loss(*args)
    for k, grad in enumerate(grads):
        np.testing.assert_allclose(grad, _central_differences(fn, args, k), rtol=1e-6,
                                   atol=1e-7)
    check_grads(fn, args, order=1, modes=("fwd", "rev"))


def test_derivatives_with_tapes_and_a_consuming_kernel(monkeypatch):
    """The tiled product's derivative, with the shared tiles taped rather than refilled
    (ZYMO_AD_TILE_REFILL=0, read when it compiles), keeps global tapes (scratch results of the
    custom call, sized from the shapes); the neighbours' derivative gathers and then launches
    the kernel that consumes the output cotangents: both within the one custom call."""
    from zymo.interop import jax_plan
    monkeypatch.setenv("ZYMO_AD_TILE_REFILL", "0")
    matmul = zm.jax.function(   # a function of its own: its derivative compiles now
        matmul_tiled,
        lambda a, b: (((b.shape[1] + TILE - 1) // TILE, (a.shape[0] + TILE - 1) // TILE),
                      (TILE, TILE)),
        outputs={"C": lambda a, b: (a.shape[0], b.shape[1])})
    rng = np.random.default_rng(3)
    a = rng.standard_normal((19, 13)).astype(np.float32)
    b = rng.standard_normal((13, 10)).astype(np.float32)
    seed = rng.standard_normal((19, 10)).astype(np.float32)
    np.testing.assert_allclose(jax.jit(matmul)(a, b), a @ b, rtol=1e-5, atol=1e-5)
    ga, gb = jax.jit(jax.grad(lambda a, b: jnp.sum(matmul(a, b) * seed), argnums=(0, 1)))(a, b)
    np.testing.assert_allclose(ga, seed @ b.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gb, a.T @ seed, rtol=1e-4, atol=1e-4)
    x = _rand(70)
    gx = jax.jit(jax.grad(lambda x: jnp.sum(pairs(x) * np.arange(70.0))))(x)
    weights = np.arange(70.0)
    want = np.zeros(70)
    want[:-1] += weights[:-1] * x[1:]
    want[1:] += weights[:-1] * x[:-1]
    np.testing.assert_allclose(gx, want, rtol=1e-13)
    plans = [made for sig, made in jax_plan._plans.items() if sig.mode == jax_plan.COTANGENT]
    assert any(made.scratch for made in plans)            # tapes
    assert any(len(made.launches) == 2 for made in plans)  # derivative, then consume


def test_forward_mode_matches_the_derivative():
    x, t = _rand(40), _rand(40, seed=9)
    out, tangent = jax.jit(lambda x, t: jax.jvp(lambda x: sine(x, 1.5), (x,), (t,)))(x, t)
    np.testing.assert_allclose(out, 1.5 * np.sin(x) * x, rtol=1e-14)
    np.testing.assert_allclose(tangent, 1.5 * (np.cos(x) * x + np.sin(x)) * t, rtol=1e-13)
    jacobian = jax.jacfwd(lambda x: polar_fn(x, x[::-1] * 1.0)[0])(x[:6])
    np.testing.assert_allclose(jacobian, jax.jacrev(lambda x: polar_fn(x, x[::-1] * 1.0)[0])(
        x[:6]), rtol=1e-13)


def test_gradient_of_one_argument_launches_only_its_shadow():
    x, w = _rand(25), _rand(25, seed=2)
    gw = jax.grad(lambda w: squares(x, w)[0])(w)
    np.testing.assert_allclose(gw, x * x, rtol=1e-14)


def test_vmap_runs_each_element_in_one_call():
    xs = np.stack([_rand(20, seed=k) for k in range(3)])
    w = _rand(20, seed=7)
    batched = jax.jit(jax.vmap(lambda x: sine(x, 1.5)))
    np.testing.assert_allclose(batched(xs), 1.5 * np.sin(xs) * xs, rtol=1e-14)
    np.testing.assert_allclose(jax.vmap(squares, in_axes=(0, None))(xs, w)[:, 0],
                               (w * xs * xs).sum(1), rtol=1e-12)
    # a batch axis other than the first, and on the second argument
    np.testing.assert_allclose(jax.vmap(squares, in_axes=(None, 1))(w, xs.T)[:, 0],
                               (xs * w * w).sum(1), rtol=1e-12)
    per_example = jax.jit(jax.vmap(jax.grad(lambda x, w: squares(x, w)[0]), in_axes=(0, None)))
    np.testing.assert_allclose(per_example(xs, w), 2 * w * xs, rtol=1e-14)
    shared = jax.grad(lambda w: jax.vmap(squares, in_axes=(0, None))(xs, w).sum())(w)
    np.testing.assert_allclose(shared, (xs * xs).sum(0), rtol=1e-12)
    nested = jax.vmap(jax.vmap(lambda x: sine(x, 0.5)))(np.stack([xs, -xs]))
    np.testing.assert_allclose(nested, 0.5 * np.sin(np.stack([xs, -xs])) * np.stack([xs, -xs]),
                               rtol=1e-14)
    xd, wd, bd = np.stack([_rand(4, 3, seed=k) for k in range(2)]), _rand(3, 2), _rand(2)
    np.testing.assert_allclose(jax.vmap(dense, in_axes=(0, None, None))(xd, wd, bd),
                               np.tanh(xd @ wd + bd), rtol=1e-13)


def test_the_lowered_program_is_a_custom_call_and_runs_no_python():
    x = _rand(64)
    calls = []
    counted = zm.jax.function(scaled_sine, lambda x, a: calls.append(1) or _blocks(x.shape[0]),
                              outputs={"y": "x"}, scalars=["a"])
    step = jax.jit(jax.value_and_grad(lambda x: jnp.sum(counted(x, 2.0) ** 2)))
    text = step.lower(x).as_text()
    assert "stablehlo.custom_call @zymo_scaled_sine" in text
    assert "callback" not in text.lower()
    step(x)
    traced = len(calls)
    assert traced > 0
    launches = []
    original = zm.Kernel.__getitem__
    zm.Kernel.__getitem__ = lambda self, config: launches.append(config) or original(self, config)
    try:
        for k in range(3):
            value, grad = step(x + k)
    finally:
        zm.Kernel.__getitem__ = original
    y = 2.0 * np.sin(x + 2) * (x + 2)
    np.testing.assert_allclose(value, np.sum(y ** 2), rtol=1e-13)
    np.testing.assert_allclose(grad, 2 * y * 2.0 * (np.cos(x + 2) * (x + 2) + np.sin(x + 2)),
                               rtol=1e-12)
    assert len(calls) == traced and not launches   # nothing in Python ran the kernels


def test_errors_name_what_to_write():
    with pytest.raises(TypeError, match="outputs is a dict"):
        zm.jax.function(scaled_sine, lambda x, a: (1, 1), outputs=["y"])
    with pytest.raises(TypeError, match="not a parameter"):
        zm.jax.function(scaled_sine, lambda x, a: (1, 1), outputs={"z": "x"})
    with pytest.raises(TypeError, match="one-element array"):
        jax.jit(sine)(_rand(4), 1.5)            # the scalar traced
    bad = zm.jax.function(writes_its_input, lambda x: _blocks(x.shape[0]), outputs={"y": "x"})
    with pytest.raises(zm.LaunchError, match="writes `x`.*name it in outputs"):
        bad(_rand(4))
    odd = zm.jax.function(scaled_sine, lambda x, a: 64, outputs={"y": "x"}, scalars=["a"])
    with pytest.raises(zm.LaunchError, match=r"return \(grid, block\)"):
        odd(_rand(4), 1.0)
    second = jax.grad(lambda x: jnp.sum(jax.grad(lambda x: jnp.sum(sine(x, 1.0)))(x)))
    with pytest.raises(zm.LaunchError, match="second order"):
        second(_rand(4))


def test_handler_structures_match_the_installed_header(tmp_path):
    """The offsets the generated handlers use against xla/ffi/api/c_api.h of this jaxlib."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    include = Path(jax.ffi.include_dir())
    if compiler is None or not (include / "xla" / "ffi" / "api" / "c_api.h").exists():
        pytest.skip("no C compiler or no XLA FFI header here")
    checks = {
        "offsetof(XLA_FFI_CallFrame, api)": xla_ffi.offset(xla_ffi.CallFrame, "api"),
        "offsetof(XLA_FFI_CallFrame, ctx)": xla_ffi.offset(xla_ffi.CallFrame, "ctx"),
        "offsetof(XLA_FFI_CallFrame, args.args)": xla_ffi.offset(xla_ffi.CallFrame, "args",
                                                                 "args"),
        "offsetof(XLA_FFI_CallFrame, rets.rets)": xla_ffi.offset(xla_ffi.CallFrame, "rets",
                                                                 "args"),
        "XLA_FFI_CallFrame_STRUCT_SIZE": xla_ffi.CALL_FRAME_SIZE,
        "offsetof(XLA_FFI_Buffer, data)": xla_ffi.offset(xla_ffi.Buffer, "data"),
        "offsetof(XLA_FFI_Extension_Base, type)": xla_ffi.offset(xla_ffi.ExtensionBase, "type"),
        "offsetof(XLA_FFI_Metadata_Extension, metadata)": xla_ffi.offset(
            xla_ffi.MetadataExtension, "metadata"),
        "offsetof(XLA_FFI_Metadata, api_version)": xla_ffi.offset(xla_ffi.Metadata,
                                                                  "api_version"),
        "offsetof(XLA_FFI_Metadata, traits)": xla_ffi.offset(xla_ffi.Metadata, "traits"),
        "offsetof(XLA_FFI_Metadata, state_type_id)": xla_ffi.offset(xla_ffi.Metadata,
                                                                    "state_type_id"),
        "XLA_FFI_Metadata_STRUCT_SIZE": xla_ffi.METADATA_SIZE,
        "XLA_FFI_Api_Version_STRUCT_SIZE": xla_ffi.API_VERSION_SIZE,
        "XLA_FFI_Error_Create_Args_STRUCT_SIZE": xla_ffi.struct_size(xla_ffi.ErrorCreateArgs,
                                                                     "errc"),
        "offsetof(XLA_FFI_Error_Create_Args, errc)": xla_ffi.offset(xla_ffi.ErrorCreateArgs,
                                                                    "errc"),
        "XLA_FFI_Stream_Get_Args_STRUCT_SIZE": xla_ffi.struct_size(xla_ffi.StreamGetArgs,
                                                                   "stream"),
        "XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE": xla_ffi.struct_size(
            xla_ffi.DeviceOrdinalGetArgs, "device_ordinal"),
        "offsetof(XLA_FFI_Api, XLA_FFI_Error_Create)": xla_ffi.offset(xla_ffi.Api,
                                                                      "XLA_FFI_Error_Create"),
        "offsetof(XLA_FFI_Api, XLA_FFI_Stream_Get)": xla_ffi.offset(xla_ffi.Api,
                                                                    "XLA_FFI_Stream_Get"),
        "offsetof(XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get)": xla_ffi.offset(
            xla_ffi.Api, "XLA_FFI_DeviceOrdinal_Get"),
        "XLA_FFI_API_MAJOR": xla_ffi.API_MAJOR,
        "XLA_FFI_API_MINOR": xla_ffi.API_MINOR,
        "XLA_FFI_Extension_Metadata": xla_ffi.EXTENSION_METADATA,
        "XLA_FFI_Error_Code_INTERNAL": xla_ffi.ERROR_INTERNAL,
    }
    source = tmp_path / "layout.c"
    lines = [f'  printf("%ld\\n", (long)({expr}));' for expr in checks]
    source.write_text('#include <stdio.h>\n#include <stddef.h>\n'
                      '#include "xla/ffi/api/c_api.h"\nint main(void) {\n' + "\n".join(lines)
                      + "\n  return 0;\n}\n")
    binary = tmp_path / "layout"
    subprocess.run([compiler, "-I", str(include), str(source), "-o", str(binary)], check=True)
    printed = subprocess.run([str(binary)], check=True, capture_output=True,
                             text=True).stdout.split()
    assert dict(zip(checks, map(int, printed))) == checks


def test_import_zymo_does_not_import_jax():
    code = "import sys, zymo; assert 'jax' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_example_optimisation_runs_as_a_user_would():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "jax_optimisation.py")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "fitted" in done.stdout


@zm.kernel(boundscheck=True)
def reads_past_the_end(x, y):
    i = zm.grid(1)
    if i < x.shape[0]:
        y[i] = x[i + 1]


def test_a_kernel_error_inside_the_compiled_call_is_an_xla_error():
    bad = zm.jax.function(reads_past_the_end, lambda x: _blocks(x.shape[0]), outputs={"y": "x"})
    with pytest.raises(Exception, match="failed inside the XLA call.*outside jax.jit"):
        jax.block_until_ready(jax.jit(bad)(_rand(10)))


# ---- the GPU handler, run on the CPU against a fake XLA and a fake driver -----------------------
_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint64, *[ctypes.c_uint32] * 7,
                           ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
_API_CALL = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_SET_CONTEXT = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint64)


class _FakeXla:
    """An XLA_FFI_Api whose stream is 0x5EA and whose device is `ordinal`, recording the
    errors the handler creates; a cuLaunchKernel answering `results` in turn."""

    def __init__(self, results, ordinal=0):
        self.launches, self.errors, self.contexts, self.results = [], [], [], list(results)
        self.keep = []

        def launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            slots = [ctypes.c_uint64.from_address(params[k]).value for k in range(self.count)]
            self.launches.append((function, (gx, gy, gz, bx, by, bz, shared), stream, slots))
            return self.results.pop(0) if self.results else 0

        def stream_get(args):
            ctypes.cast(args, ctypes.POINTER(xla_ffi.StreamGetArgs))[0].stream = 0x5EA
            return None

        def ordinal_get(args):
            ctypes.cast(args, ctypes.POINTER(xla_ffi.DeviceOrdinalGetArgs))[0].device_ordinal = \
                ordinal
            return None

        def error_create(args):
            made = ctypes.cast(args, ctypes.POINTER(xla_ffi.ErrorCreateArgs))[0]
            self.errors.append((ctypes.string_at(made.message).decode(), made.errc))
            return 0xE770

        def set_context(context):
            self.contexts.append(context)
            return 0

        self.launch = _LAUNCH(launch)
        self.set_context = _SET_CONTEXT(set_context)
        callbacks = {"XLA_FFI_Stream_Get": stream_get, "XLA_FFI_DeviceOrdinal_Get": ordinal_get,
                     "XLA_FFI_Error_Create": error_create}
        self.api = xla_ffi.Api()
        self.api.struct_size = xla_ffi.struct_size(xla_ffi.Api, "XLA_FFI_DeviceOrdinal_Get")
        for name, fn in callbacks.items():
            wrapped = _API_CALL(fn)
            self.keep.append(wrapped)
            setattr(self.api, name, ctypes.cast(wrapped, ctypes.c_void_p).value)

    def address(self, fn) -> int:
        return ctypes.cast(fn, ctypes.c_void_p).value

    def call(self, handler: int, args: list[int], rets: list[int], extension=None):
        buffers = [xla_ffi.Buffer(data=data) for data in args + rets]
        self.keep.append(buffers)
        pointers = [(ctypes.c_void_p * max(n, 1))(*[ctypes.addressof(b) for b in part])
                    for n, part in ((len(args), buffers[:len(args)]),
                                    (len(rets), buffers[len(args):]))]
        self.keep.append(pointers)
        frame = xla_ffi.CallFrame()
        frame.struct_size = xla_ffi.CALL_FRAME_SIZE
        frame.api = ctypes.addressof(self.api)
        frame.extension_start = extension
        frame.stage = 3
        frame.args.size, frame.args.args = len(args), ctypes.addressof(pointers[0])
        frame.rets.size, frame.rets.args = len(rets), ctypes.addressof(pointers[1])
        return ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(handler)(
            ctypes.addressof(frame))


def _device_handler(fake, batch=1, ordinal=0):
    fake.count = 5
    patches = (xla_ffi.Patch(0, 0, False, batch_stride=800), xla_ffi.Patch(3, 0, True, 16))
    launch = xla_ffi.DeviceLaunch(0xF00, fake.address(fake.launch), (4, 2, 1, 64, 1, 1, 96),
                                  (0, 100, 1, 0, 7), patches, "zymo: launching k failed: "
                                  "CUresult {}")
    context = xla_ffi.DeviceContext(fake.address(fake.set_context), 0xC0DE, ordinal)
    return xla_ffi.build_handler([launch], batch, context)


def test_the_gpu_handler_launches_on_xlas_stream_with_the_buffers():
    fake = _FakeXla([])
    handler = _device_handler(fake, batch=3)
    assert fake.call(handler, [0x10000], [0x20000]) is None
    assert [launch[:3] for launch in fake.launches] == \
        [(0xF00, (4, 2, 1, 64, 1, 1, 96), 0x5EA)] * 3
    # each element of the batch: the operand advanced by 800 bytes, the result by 16
    assert [launch[3] for launch in fake.launches] == \
        [[0x10000 + 800 * k, 100, 1, 0x20000 + 16 * k, 7] for k in range(3)]
    assert not fake.errors and not fake.contexts


def test_the_gpu_handler_reports_failures_and_sets_a_missing_context():
    fake = _FakeXla([201, 0])       # CUDA_ERROR_INVALID_CONTEXT, then a launch
    handler = _device_handler(fake)
    assert fake.call(handler, [1], [2]) is None
    assert fake.contexts == [0xC0DE] and len(fake.launches) == 2
    fake = _FakeXla([700])
    assert fake.call(_device_handler(fake), [1], [2]) == 0xE770
    assert fake.errors == [("zymo: launching k failed: CUresult 700", xla_ffi.ERROR_INTERNAL)]
    fake = _FakeXla([], ordinal=1)
    assert fake.call(_device_handler(fake), [1], [2]) == 0xE770 and not fake.launches
    assert "XLA runs the call on device 1" in fake.errors[0][0]


def test_the_handler_answers_the_metadata_query():
    fake = _FakeXla([])
    metadata = xla_ffi.Metadata(struct_size=ctypes.sizeof(xla_ffi.Metadata), traits=7,
                                state_type_id=99)
    extension = xla_ffi.MetadataExtension()
    extension.extension_base.struct_size = ctypes.sizeof(xla_ffi.MetadataExtension)
    extension.extension_base.type = xla_ffi.EXTENSION_METADATA
    extension.metadata = ctypes.addressof(metadata)
    assert fake.call(_device_handler(fake), [1], [2], ctypes.addressof(extension)) is None
    assert not fake.launches
    version = metadata.api_version
    assert (version.struct_size, version.major_version, version.minor_version) == \
        (xla_ffi.API_VERSION_SIZE, xla_ffi.API_MAJOR, xla_ffi.API_MINOR)
    assert metadata.traits == 0 and metadata.state_type_id == 0
