"""Warm launch overhead on a GPU: zymo against cuda.core's `launch`, the raw cuda-bindings
cuLaunchKernel with the arguments packed beforehand, CuPy RawKernel and numba-cuda, for
kernels taking 0, 1, 4 and 16 arrays, all in one run; plus zymo's compile times (cold, disk
hit) and import time.

    python bench/launch_overhead.py [--output bench/results/launch_overhead.md]

Each number is the best of 7 rounds of the host time per launch of 5,000 back-to-back launches
of an empty kernel (grid 1, block 32), after a warm-up; the GPU runs them as they come. Rounds
go through all launchers in turn, so that drifting machine load touches them alike.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import launch_kernels as lk  # noqa: E402

import zymo as zm  # noqa: E402
from zymo.runtime.cuda import cache, driver  # noqa: E402

COUNTS = (0, 1, 4, 16)
LAUNCHES, ROUNDS = 5000, 7


def per_launch_us(launch_once):
    """A deferred measurement: `measure_all` runs it, interleaved with the others."""
    for _ in range(200):
        launch_once()
    driver.synchronize()
    return Measurement(launch_once)


class Measurement:
    def __init__(self, launch_once):
        self.launch_once, self.rounds = launch_once, []

    def round(self) -> None:
        launch_once = self.launch_once
        start = time.perf_counter()
        for _ in range(LAUNCHES):
            launch_once()
        self.rounds.append((time.perf_counter() - start) / LAUNCHES * 1e6)
        driver.synchronize()


def measure_all(rows: dict) -> dict:
    measurements = [m for row in rows.values() for m in row.values()]
    for _ in range(ROUNDS):
        for measurement in measurements:
            measurement.round()
    return {name: {count: min(m.rounds) for count, m in row.items()}
            for name, row in rows.items()}


def zymo_rows(arrays: dict) -> dict:
    """`kernel[1, 32](*args)` as users write it (the configuration looked up each time; with
    no arguments to say where it runs, the kernel is put on CUDA explicitly)."""
    rows = {}
    for library, make in arrays.items():
        row = {}
        for count in COUNTS:
            kernel = lk.KERNELS[count] if count else lk.KERNELS[0].on("cuda")
            args = [make() for _ in range(count)]
            row[count] = per_launch_us(lambda k=kernel, a=args: k[1, 32](*a))
        rows[f"zymo ({library} arrays)"] = row
    row = {}
    for count in COUNTS:   # the same with a kernel that writes one array from the others
        kernel = lk.WRITING[count] if count else lk.WRITING[0].on("cuda")
        args = [arrays["zm.to_device"]() for _ in range(count)]
        row[count] = per_launch_us(lambda k=kernel, a=args: k[1, 32](*a))
    rows["zymo (zm.to_device arrays), a0 written: noalias pairs checked (0, 0, 3, 15)"] = row
    return rows


def by_name_rows(arrays: dict) -> dict:
    """CuPy and PyTorch arrays with the compiled launcher reading every part by name, as it did
    before it called the types' descriptors directly and read a contiguity flag instead of
    the strides (the same launches as zymo_rows, on fresh kernels)."""
    import copy

    from zymo.runtime.cuda import launch, native
    direct, readers = native._direct, dict(launch._READER_OF)
    native._direct = lambda *args: None
    for describe, reader in readers.items():
        plain = launch._READER_OF[describe] = copy.copy(reader)
        plain.contiguous = None
    _forget_readers(launch)
    rows = {}
    try:
        for library in ("CuPy", "PyTorch"):
            if library not in arrays:
                continue
            row = {}
            for count in COUNTS:
                kernel = zm.kernel(lk.KERNELS[count].py_func, backend="cuda")
                args = [arrays[library]() for _ in range(count)]
                kernel[1, 32](*args)
                kernel[1, 32]._cuda[0]._guarded.clear()     # a plan shared with another
                kernel[1, 32]._fast = None                  # kernel: its tables built anew,
                kernel[1, 32](*args)                        # reading by name
                row[count] = per_launch_us(lambda k=kernel, a=args: k[1, 32](*a))
            rows[f"zymo ({library} arrays), parts read by name (before)"] = row
    finally:
        native._direct = direct
        launch._READER_OF.update(readers)
        _forget_readers(launch)
    return rows


def _forget_readers(launch) -> None:
    """Every foreign type's describer and reader looked up anew at its next launch (clearing
    the readers alone would leave the describers, which are what fills the readers in: the
    other rows' kernels would then get no guarded launcher and take the general path)."""
    launch._READERS.clear()
    for kind in [k for k in launch._DESCRIBERS if k is not launch.DeviceArray]:
        del launch._DESCRIBERS[kind]


def numba_api_rows() -> dict:
    """The same kernels through `from zymo import cuda` (`@cuda.jit`, launched as numba code
    launches), with zm.to_device arrays and with cuda.to_device arrays: the dispatcher is a
    zm.Kernel, so the first row should match zymo's."""
    from zymo import cuda
    rows = {}
    for label, make in (("zm.to_device", lambda: zm.to_device(np.zeros(1024, np.float32))),
                        ("cuda.to_device", lambda: cuda.to_device(np.zeros(1024, np.float32)))):
        row = {}
        for count in COUNTS:
            kernel = cuda.jit(lk.KERNELS[count].py_func)
            args = [make() for _ in range(count)]
            row[count] = per_launch_us(lambda k=kernel, a=args: k[1, 32](*a))
        rows[f"zymo.cuda @cuda.jit ({label} arrays)"] = row
    return rows


def zymo_variant_rows() -> dict:
    """zm.to_device arrays through zymo's two other launch paths: the compiled words launcher
    with the words read beforehand (zymo's floor), and the struct-packing fallback used where
    the host JIT cannot build launchers (ZYMO_NATIVE_LAUNCH=0)."""
    floor, fallback = {}, {}
    for count in COUNTS:
        args = [zm.to_device(np.zeros(1024, np.float32)) for _ in range(count)]
        kernel = zm.kernel(lk.KERNELS[count].py_func, backend="cuda")
        kernel[1, 32](*args)
        plan, state = kernel[1, 32]._cuda
        words = [w for a in args for w in a._words]
        floor[count] = per_launch_us(
            lambda p=plan, s=state, w=words: p.launchers[0](p.table.address, s[1], *w))
        os.environ["ZYMO_NATIVE_LAUNCH"] = "0"
        try:
            kernel = zm.kernel(lk.KERNELS[count].py_func, backend="cuda")
            kernel[1, 32](*args)   # the plan is made now, without launchers
        finally:
            del os.environ["ZYMO_NATIVE_LAUNCH"]
        fallback[count] = per_launch_us(lambda k=kernel, a=args: k[1, 32](*a))
    return {"zymo compiled launcher, words read beforehand": floor,
            "zymo struct fallback (ZYMO_NATIVE_LAUNCH=0)": fallback}


def zymo_breakdown() -> dict[str, float]:
    """Where a warm 4-array launch of zymo spends its time (microseconds, timeit)."""
    import timeit

    from zymo.runtime.cuda import launch as cuda_launch
    kernel = lk.KERNELS[4]
    args = [zm.to_device(np.zeros(1024, np.float32)) for _ in range(4)]
    kernel[1, 32](*args)
    config = kernel[1, 32]
    plan, state = config._cuda
    dims = state[0]
    words = [w for a in args for w in a._words]
    block = plan.blocks[0]
    fast = config._fast
    pieces = {
        "kernel[1, 32] (cached Launch)": lambda: kernel[1, 32],
        "compiled guarded launcher: checks, reads, launches": lambda: fast(*args),
        "compiled words launcher (words read beforehand)": lambda: plan.launchers[0](
            plan.table.address, state[1], *words),
        "general path: launch(config, args)": lambda: cuda_launch.launch(config, args),
        "fallback: struct.pack_into 12 words": lambda: plan.pack(block[0], 0, *words),
        "fallback: cuLaunchKernel (cuda-bindings)": lambda: plan.launch_kernel(
            plan.function, *dims, block[1], 0),
        "cuLaunchKernel through ctypes (libcuda, for comparison)": _ctypes_launch(plan, dims,
                                                                                  block[1]),
        "kernel[1, 32](*args) (everything)": lambda: kernel[1, 32](*args),
    }
    try:   # the same launch with 4 PyTorch tensors: the guarded launcher reads them itself
        import torch
        tensors = [torch.zeros(1024, device="cuda") for _ in range(4)]
        kernel[1, 32](*tensors)
        foreign = kernel[1, 32]._fast
        if foreign is None:   # the general path every launch: say so, time the rest
            plan_t = kernel[1, 32]._cuda[0]
            print(f"4 PyTorch tensors: no guarded launcher (plan.run {plan_t.run.__name__}, "
                  f"table {plan_t.table is not None})", file=sys.stderr)
        else:
            pieces["compiled guarded launcher, 4 PyTorch tensors"] = lambda: foreign(*tensors)
        pieces["kernel[1, 32](*tensors), 4 PyTorch tensors"] = lambda: kernel[1, 32](*tensors)
    except ImportError:
        pass
    try:   # and 4 JAX arrays: the words their describer left, the pointer read anew
        import jax
        gpu = jax.devices("gpu")[0]
        jarrays = [jax.device_put(np.zeros(1024, np.float32), gpu) for _ in range(4)]
        kernel[1, 32](*jarrays)
        jax_fast = kernel[1, 32]._fast
        if jax_fast is None:
            print("4 JAX arrays: no guarded launcher", file=sys.stderr)
        else:
            pieces["compiled guarded launcher, 4 JAX arrays"] = lambda: jax_fast(*jarrays)
        pieces["kernel[1, 32](*arrays), 4 JAX arrays"] = lambda: kernel[1, 32](*jarrays)

        def first_launch():   # as if each array were new: the general path, DLPack
            for array in jarrays:
                array.__dict__.pop(cuda_launch.JAX_MEMO, None)
            kernel[1, 32](*jarrays)
    except Exception as error:  # noqa: BLE001 - no JAX GPU backend: no piece
        print(f"jax pieces: skipped ({type(error).__name__}: {error})", file=sys.stderr)
        first_launch = None
    out = {}
    for name, fn in pieces.items():
        number = 20000
        out[name] = min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6
        driver.synchronize()
    if first_launch is not None:
        out["kernel[1, 32](*arrays), 4 JAX arrays launched for the first time"] = \
            min(timeit.repeat(first_launch, number=200, repeat=5)) / 200 * 1e6
    return out


def flat_args(count: int):
    """The .entry arguments of the zymo kernels, as cuda.core and cuLaunchKernel take them."""
    arrays = [zm.to_device(np.zeros(1024, np.float32)) for _ in range(count)]
    return arrays, [v for a in arrays for v in (np.uint64(a.data), np.int64(1024), np.int64(1))]


def _ctypes_launch(plan, dims, params_address):
    """A launch of the same plan through ctypes, bypassing cuda-bindings."""
    import ctypes
    libcuda = ctypes.CDLL("libcuda.so.1")
    function = libcuda.cuLaunchKernel
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    handle, stream = int(plan.function), int(dims[7])
    numbers = dims[:7]
    return lambda: function(handle, *numbers, stream, params_address, None)


def cuda_core_row() -> dict:
    try:
        import cuda.core as core
    except ImportError:
        import cuda.core.experimental as core
    Device, LaunchConfig, ObjectCode, launch = (core.Device, core.LaunchConfig, core.ObjectCode,
                                                core.launch)
    device = Device(driver.current_device().ordinal)
    device.set_current()
    # the legacy default stream, where the zymo rows launch too
    stream = getattr(core, "LEGACY_DEFAULT_STREAM", None) or device.create_stream()
    config = LaunchConfig(grid=1, block=32)
    row = {}
    for count in COUNTS:
        program = lk.KERNELS[count].specialize(*[zm.Array(zm.f32, 1)] * count).compiled("cuda")
        kernel = ObjectCode.from_ptx(program.ptx.encode()).get_kernel(program.kernel_name)
        keep, args = flat_args(count)
        row[count] = per_launch_us(
            lambda k=kernel, a=args, keep=keep: launch(stream, config, k, *a))
    return {"cuda.core launch (numpy scalar args)": row}


def bindings_row() -> dict:
    """cuLaunchKernel with arguments packed beforehand: what any Python launcher pays at least."""
    import ctypes
    drv = driver.bindings()
    row = {}
    for count in COUNTS:
        program = lk.KERNELS[count].specialize(*[zm.Array(zm.f32, 1)] * count).compiled("cuda")
        function = program.function(driver.current_device())
        keep, args = flat_args(count)
        slots = (ctypes.c_uint64 * max(len(args), 1))(*[int(a) for a in args])
        pointers = (ctypes.c_void_p * max(len(args), 1))(
            *[ctypes.addressof(slots) + 8 * k for k in range(len(args))])
        address = ctypes.addressof(pointers) if args else 0
        stream = drv.CUstream(0)
        row[count] = per_launch_us(
            lambda f=function, p=address, keep=(keep, slots, pointers): drv.cuLaunchKernel(
                f, 1, 1, 1, 32, 1, 1, 0, stream, p, 0))
    return {"cuda-bindings cuLaunchKernel, pre-packed": row}


def cupy_row() -> dict:
    import cupy
    row = {}
    for count in COUNTS:
        params = ", ".join(f"float* a{k}" for k in range(count))
        kernel = cupy.RawKernel(f'extern "C" __global__ void k({params}) {{}}', "k")
        args = tuple(cupy.zeros(1024, cupy.float32) for _ in range(count))
        row[count] = per_launch_us(lambda k=kernel, a=args: k((1,), (32,), a))
    return {"CuPy RawKernel (NVRTC)": row}


def numba_row() -> dict:
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack   # numba-cuda 0.30.4 still calls it; gone in NumPy 2.5
    from numba import cuda
    row = {}
    for count in COUNTS:
        names = ", ".join(f"a{k}" for k in range(count))
        scope: dict = {}
        exec(f"def k({names}):\n    pass\n", scope)
        kernel = cuda.jit(scope["k"])
        args = [cuda.to_device(np.zeros(1024, np.float32)) for _ in range(count)]
        row[count] = per_launch_us(lambda k=kernel, a=args: k[1, 32](*a))
    return {"numba-cuda": row}


def compile_times() -> dict[str, float]:
    """Milliseconds: saxpy source -> PTX and cubin, cold and from the disk cache."""
    spec_types = (zm.f32, zm.Array(zm.f32, 1), zm.Array(zm.f32, 1))
    os.environ["ZYMO_CACHE"] = "0"
    start = time.perf_counter()
    spec = zm.kernel(lk.saxpy.py_func).specialize(*spec_types)
    spec.compiled("cuda")
    cold = (time.perf_counter() - start) * 1e3
    timings = {f"cold: {k}": v * 1e3 for k, v in spec.timings.items()}
    os.environ["ZYMO_CACHE"] = "1"
    zm.kernel(lk.saxpy.py_func).specialize(*spec_types).compiled("cuda")   # fill the disk
    start = time.perf_counter()
    spec = zm.kernel(lk.saxpy.py_func).specialize(*spec_types)
    spec.compiled("cuda")
    hit = (time.perf_counter() - start) * 1e3
    hits = {f"disk hit: {k}": v * 1e3 for k, v in spec.timings.items()}
    from zymo.runtime.cuda import native
    return {"saxpy cold (frontend, passes, PTX, cubin)": cold, **timings,
            "saxpy disk hit (frontend, passes, read PTX and cubin)": hit, **hits,
            "compiled launchers, built at the first CUDA launch (once per process)":
                native.build_seconds * 1e3}


def import_ms() -> float:
    code = "import time; t = time.perf_counter(); import zymo; print(time.perf_counter() - t)"
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout) * 1e3 for _ in range(5)]
    return float(np.median(runs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", default=None)
    options = parser.parse_args()
    device = driver.current_device()
    warm = lk.KERNELS[0].on("cuda")
    for _ in range(50000):      # clocks and driver queues settle before anything is timed
        warm[1, 32]()
    driver.synchronize()
    arrays = {"zm.to_device": lambda: zm.to_device(np.zeros(1024, np.float32))}
    rows: dict = {}
    for name, make_rows in (("cupy", cupy_row), ("numba", numba_row)):
        try:
            rows.update(make_rows())
        except Exception as error:  # a missing library is a missing row, not a failed run
            print(f"{name}: skipped ({type(error).__name__}: {error})", file=sys.stderr)
    try:
        import cupy
        arrays["CuPy"] = lambda: cupy.zeros(1024, cupy.float32)
        import torch
        arrays["PyTorch"] = lambda: torch.zeros(1024, device="cuda")
    except ImportError:
        pass
    try:   # JAX arrays (the compiled launcher reads the words their describer left)
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax
        gpu = jax.devices("gpu")[0]
        arrays["JAX"] = lambda: jax.device_put(np.zeros(1024, np.float32), gpu)
    except Exception as error:  # noqa: BLE001 - no JAX, or no JAX GPU backend: no row
        print(f"jax: skipped ({type(error).__name__}: {error})", file=sys.stderr)
    rows = measure_all({**zymo_rows(arrays), **by_name_rows(arrays), **numba_api_rows(),
                        **zymo_variant_rows(),
                        **cuda_core_row(),
                        **bindings_row(), **rows})
    lines = [f"# Launch overhead: {device.name} ({device.arch}), driver CUDA "
             f"{'.'.join(map(str, driver.driver_version()))}, cuda-bindings "
             f"{_version('cuda-bindings')}, cuda-core {_version('cuda-core')}", "",
             "Host microseconds per warm launch of an empty kernel, best of "
             f"{ROUNDS} interleaved rounds of {LAUNCHES} launches.", "",
             "| launcher | " + " | ".join(f"{c} arrays" for c in COUNTS) + " |",
             "|---|" + "---:|" * len(COUNTS)]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[c]:.2f}" for c in COUNTS) + " |")
    lines += ["", "| zymo, 4 arrays: piece | us |", "|---|---:|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in zymo_breakdown().items()]
    lines += ["", "| compile / import | ms |", "|---|---:|"]
    lines += [f"| {k} | {v:.1f} |" for k, v in compile_times().items()]
    lines.append(f"| import zymo | {import_ms():.0f} |")
    lines.append(f"\ncache: {cache.stats}")
    text = "\n".join(lines)
    print(text)
    if options.output:
        Path(options.output).write_text(text + "\n")
    return 0


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
