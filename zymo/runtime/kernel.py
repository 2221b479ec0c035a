"""Kernels as users see them: `@zm.kernel`, launch configuration, specialization per argument
types (cached), and dispatch to a backend."""
from __future__ import annotations

import os
import time

import numpy as np

from ..diagnostics import LaunchError
from ..frontend import Param, lower_kernel
from ..ir import types as T
from ..ir.types import Array, Scalar

BACKENDS = ("cpu", "interp")


def default_backend() -> str:
    name = os.environ.get("ZYMO_BACKEND", "cpu")
    if name not in BACKENDS:
        raise LaunchError(f"ZYMO_BACKEND={name!r}: choose one of {', '.join(BACKENDS)}")
    return name


def param_of_arg(value) -> Param:
    """How a launch argument is passed, from its Python/NumPy type."""
    if isinstance(value, np.ndarray):
        layout = "C" if value.flags.c_contiguous else "A"
        try:
            dtype = T.scalar_of_dtype(value.dtype)
        except KeyError:
            raise LaunchError(f"arrays of {value.dtype} are not supported") from None
        return Param("array", Array(dtype, value.ndim, "global", layout))
    if isinstance(value, (bool, np.bool_)):
        return Param("value", T.bool_)
    if isinstance(value, np.generic):
        return Param("value", T.scalar_of_dtype(value.dtype))
    if isinstance(value, int):
        return Param("weak", T.i64)
    if isinstance(value, float):
        return Param("weak", T.f64)
    raise LaunchError(f"unsupported kernel argument of type {type(value).__name__}: pass NumPy "
                      f"arrays, NumPy scalars or Python numbers")


def param_of_spec(spec) -> Param:
    """A Param from a type given to `specialize` (or an example argument)."""
    if isinstance(spec, Param):
        return spec
    if isinstance(spec, Array):
        return Param("array", spec)
    if isinstance(spec, Scalar):
        return Param("value", spec)
    if spec is float:
        return Param("weak", T.f64)
    if spec is int:
        return Param("weak", T.i64)
    return param_of_arg(spec)


def _arg_key(value):
    if isinstance(value, np.ndarray):
        return (value.dtype.num, value.ndim, value.flags.c_contiguous)
    return type(value) if not isinstance(value, np.generic) else value.dtype.num


def normalize_dims(value, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) for d in dims):
        raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, not {value!r}")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    if any(d < 1 for d in dims):
        raise LaunchError(f"{what} dimensions must be positive, not {value!r}")
    return dims  # type: ignore[return-value]


class Kernel:
    """A `@zm.kernel`: launch with `kernel[grid, block](*args)`."""

    is_zymo_kernel = True

    def __init__(self, py_func, backend: str | None = None, boundscheck: bool = False,
                 fastmath: bool = False, _shared=None):
        self.py_func = py_func
        self.__name__ = getattr(py_func, "__name__", "kernel")
        self.__doc__ = getattr(py_func, "__doc__", None)
        self.backend = backend
        self.boundscheck = boundscheck
        self.fastmath = fastmath
        # specializations are shared between views of one kernel (`kernel.on(...)`)
        self._specs = _shared if _shared is not None else {}
        self._fast: dict = {}

    def on(self, backend: str) -> "Kernel":
        """The same kernel, launched on `backend` ("cpu" or "interp")."""
        if backend not in BACKENDS:
            raise LaunchError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
        return Kernel(self.py_func, backend, self.boundscheck, self.fastmath, self._specs)

    def __getitem__(self, config) -> "Launch":
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise LaunchError("launch as kernel[grid, block] or kernel[grid, block, stream, "
                              "shared_bytes]")
        grid = normalize_dims(config[0], "grid")
        block = normalize_dims(config[1], "block")
        shared = int(config[3]) if len(config) > 3 else 0
        return Launch(self, grid, block, shared)

    def __call__(self, *args, **kwargs):
        raise LaunchError(f"launch {self.__name__} with a configuration: "
                          f"{self.__name__}[blocks, threads](...)")

    def specialize(self, *types_or_args) -> "Specialization":
        params = tuple(param_of_spec(s) for s in types_or_args)
        return self._specialization(params)

    def _specialization(self, params: tuple[Param, ...]) -> "Specialization":
        key = tuple(p.key() for p in params)
        spec = self._specs.get(key)
        if spec is None:
            spec = Specialization(self, params)
            self._specs[key] = spec
        return spec

    def specialization_for(self, args) -> "Specialization":
        fast_key = tuple(_arg_key(a) for a in args)
        spec = self._fast.get(fast_key)
        if spec is None:
            spec = self._specialization(tuple(param_of_arg(a) for a in args))
            self._fast[fast_key] = spec
        return spec

    def __repr__(self) -> str:
        return f"<zymo kernel {self.__name__}>"


class Launch:
    __slots__ = ("kernel", "grid", "block", "shared")

    def __init__(self, kernel: Kernel, grid, block, shared: int):
        self.kernel, self.grid, self.block, self.shared = kernel, grid, block, shared

    def __call__(self, *args):
        kernel = self.kernel
        spec = kernel.specialization_for(args)
        backend = kernel.backend or default_backend()
        spec.launch(backend, self.grid, self.block, args, self.shared)


class Specialization:
    """One compiled signature of a kernel: its IR at each stage and its backend artifacts."""

    def __init__(self, kernel: Kernel, params: tuple[Param, ...]):
        self.kernel = kernel
        self.params = params
        self.timings: dict[str, float] = {}
        start = time.perf_counter()
        self.module = lower_kernel(kernel.py_func, list(params))
        self.timings["frontend"] = time.perf_counter() - start
        self._optimized = None
        self._compiled: dict[str, object] = {}

    @property
    def optimized(self):
        if self._optimized is None:
            from ..passes.pipeline import run_pipeline
            start = time.perf_counter()
            self._optimized = run_pipeline(_copy_module(self.module))
            self.timings["passes"] = time.perf_counter() - start
        return self._optimized

    def ir(self, stage: str = "opt") -> str:
        """The IR as text: stage "frontend" (as lowered) or "opt" (after the passes)."""
        return str(self.module if stage == "frontend" else self.optimized)

    def llvm(self, target: str = "cpu", optimized: bool = True) -> str:
        compiled = self.compiled(target)
        return compiled.llvm_ir if not optimized else getattr(compiled, "optimized_llvm_ir",
                                                               compiled.llvm_ir)

    def compiled(self, backend: str):
        artifact = self._compiled.get(backend)
        if artifact is None:
            start = time.perf_counter()
            if backend == "cpu":
                from ..backend import cpu
                artifact = cpu.compile(self.optimized, boundscheck=self.kernel.boundscheck)
            elif backend == "interp":
                artifact = _Interpreted(self.optimized)
            else:
                raise LaunchError(f"unknown backend {backend!r}")
            self.timings[f"compile-{backend}"] = time.perf_counter() - start
            self._compiled[backend] = artifact
        return artifact

    def launch(self, backend: str, grid, block, args, shared: int = 0) -> None:
        if len(args) != len(self.params):
            raise LaunchError(f"{self.kernel.__name__} takes {len(self.params)} arguments, "
                              f"got {len(args)}")
        self.compiled(backend).launch(grid, block, _pass_args(args, self.params), shared)


class _Interpreted:
    def __init__(self, module):
        self.module = module

    def launch(self, grid, block, args, shared: int = 0) -> None:
        from ..backend import interp
        interp.run(self.module, grid, block, args, shared_bytes=shared)


def _pass_args(args, params: tuple[Param, ...]) -> list:
    out = []
    for value, param in zip(args, params):
        if param.kind == "array":
            out.append(value)
        else:
            out.append(param.type.dtype.type(value))
    return out


def _copy_module(module):
    from ..ir.module import Module
    copy = Module(module.entry)
    mapping: dict = {}
    for func in module:
        copy.add(func.clone(mapping))
    return copy


def kernel(py_func=None, *, backend: str | None = None, boundscheck: bool = False,
           fastmath: bool = False, **numba_options):
    """Decorate a kernel (`@zm.kernel` or `@zm.kernel(boundscheck=True)`); also accepts a
    numba `@cuda.jit` dispatcher or its `py_func`."""
    def wrap(fn):
        fn = getattr(fn, "py_func", fn)
        return Kernel(fn, backend=backend, boundscheck=boundscheck, fastmath=fastmath)

    return wrap(py_func) if py_func is not None else wrap
