"""Kernels as users see them: `@zm.kernel`, launch configuration, specialization per argument
types (cached), and dispatch to a backend."""
from __future__ import annotations

import os

import numpy as np

from ..diagnostics import LaunchError
from ..frontend import Param
from ..ir.traits import CallsFunction, ReadsMemory, WritesMemory
from ..ir.types import SMALL_ELEMENTS, Array
from ..ops.views import array_origin
from ..switches import switch
from .compile import Job, compile
from .cuda.arguments import flatten_arg, is_composite, param_of_arg, param_of_spec
from .cuda.arrays import is_gpu_array

BACKENDS = ("cpu", "interp", "cuda")


def debug_mode() -> bool:
    """ZYMO_DEBUG=1: NumPy launches run on the reference interpreter (data races, out-of-bounds
    accesses and divergent barriers are errors naming the source line), and every kernel that
    still compiles (GPU arrays, an explicit `.on("cpu")`) is bounds-checked."""
    return switch("ZYMO_DEBUG", False)


def boundscheck_everywhere() -> bool:
    """ZYMO_BOUNDSCHECK=1 (or ZYMO_DEBUG=1): every kernel is compiled with bounds checks, as
    with `zm.kernel(boundscheck=True)`; read when a kernel object is made."""
    return switch("ZYMO_BOUNDSCHECK", False) or debug_mode()


def default_backend() -> str:
    """Where NumPy arrays launch: $ZYMO_BACKEND (default "cpu"), or the interpreter under
    ZYMO_DEBUG=1."""
    if debug_mode():
        return "interp"
    name = os.environ.get("ZYMO_BACKEND", "cpu")
    if name not in BACKENDS:
        raise LaunchError(f"ZYMO_BACKEND={name!r}: choose one of {', '.join(BACKENDS)}")
    return name


def _arg_key(value):
    if isinstance(value, np.ndarray):
        contiguous = value.flags.c_contiguous
        return (value.dtype.num, value.ndim, contiguous, contiguous and value.size < SMALL_ELEMENTS)
    if isinstance(value, (bool, int, float)):
        return type(value)
    if isinstance(value, np.generic):
        return value.dtype.num
    return param_of_arg(value).key()   # GPU arrays: one type, many dtypes and layouts


def _backend_of(args) -> str:
    """NumPy arrays run on the CPU backend (or $ZYMO_BACKEND), GPU arrays on CUDA."""
    for value in args:
        if is_gpu_array(value):
            return "cuda"
    return default_backend()


_cuda_launch = None


def _load_cuda_launch():
    global _cuda_launch
    from .cuda.launch import launch   # at the first CUDA launch, not with zymo
    _cuda_launch = launch
    return launch


def normalize_dims(value, what: str) -> tuple[int, int, int]:
    try:
        dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    except TypeError:    # a float, None, ...
        dims = (value,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) for d in dims):
        raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, not {value!r}")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    if any(d < 1 for d in dims):
        raise LaunchError(f"{what} dimensions must be positive, not {value!r}")
    return dims  # type: ignore[return-value]


class Kernel:
    """A `@zm.kernel`: launch with `kernel[grid, block](*args)`."""

    is_zymo_kernel = True
    launch_class = None   # what kernel[grid, block] makes (None: Launch)

    def __init__(self, py_func, backend: str | None = None, boundscheck: bool = False,
                 fastmath: bool = False, _shared=None, _plans=None,
                 max_registers: int | None = None, _capped=None, _derived=None):
        self.py_func = py_func
        self.__name__ = getattr(py_func, "__name__", "kernel")
        self.__doc__ = getattr(py_func, "__doc__", None)
        self.backend = backend
        self.boundscheck = boundscheck or boundscheck_everywhere()
        self.fastmath = fastmath
        self.max_registers = max_registers
        # specializations are shared between views of one kernel (`kernel.on(...)`), and so
        # are its copies with other register caps (`with_max_registers`), by cap
        self._specs = _shared if _shared is not None else {}
        self._capped: dict = _capped if _capped is not None else {}
        # derivatives' specializations (zm.grad, zm.jvp), by family, shared like the specs:
        # each `zm.grad(kernel)` (or zm.Tape's) finds the ones an earlier one derived
        self._derived: dict = _derived if _derived is not None else {}
        self._fast: dict = {}
        # CUDA launch plans by argument types (each for its device), shared like the specs
        self._plans: dict = _plans if _plans is not None else {}
        self._launches: dict = {}   # kernel[config] -> Launch, so a warm launch reuses it
        self._flat: dict = {}       # composite argument structure -> _Flattened view
        self._captured = None       # the GPU arrays it names (runtime/captured.py), once known

    def on(self, backend: str) -> "Kernel":
        """The same kernel, launched on `backend` ("cpu", "interp" or "cuda")."""
        if backend not in BACKENDS:
            raise LaunchError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
        return Kernel(self.py_func, backend, self.boundscheck, self.fastmath, self._specs,
                      self._plans, self.max_registers, self._capped, self._derived)

    def __getitem__(self, config) -> "Launch":
        try:
            launch = self._launches.get(config)
        except TypeError:   # an unhashable configuration (a list): not cached
            launch = None
        if launch is None:
            launch = self._configure(config)
        return launch

    def _configure(self, config) -> "Launch":
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise LaunchError("launch as kernel[grid, block] or kernel[grid, block, stream, "
                              "shared_bytes]")
        grid = normalize_dims(config[0], "grid")
        block = normalize_dims(config[1], "block")
        stream = config[2] if len(config) > 2 else None
        shared = int(config[3]) if len(config) > 3 else 0
        if shared < 0:
            raise LaunchError(f"shared memory size must not be negative, not {shared}")
        launch = (self.launch_class or Launch)(self, grid, block, shared, stream)
        try:
            if len(self._launches) >= 256:
                self._launches.clear()
            self._launches[config] = launch
        except TypeError:
            pass
        return launch

    def __reduce__(self):
        # by reference, as pickle does for functions: the decorated name is the Kernel
        fn = self.py_func
        if "<locals>" in fn.__qualname__:
            raise LaunchError(f"{self.__name__} is defined inside a function, so worker "
                              f"processes cannot import it: define it at module level")
        return (_import_kernel, (fn.__module__, fn.__qualname__, self.backend,
                                 self.boundscheck, self.fastmath, self.max_registers))

    def __call__(self, *args, **kwargs):
        raise LaunchError(f"launch {self.__name__} with a configuration: "
                          f"{self.__name__}[blocks, threads](...)")

    def specialize(self, *types_or_args) -> "Specialization":
        params = tuple(param_of_spec(s) for s in types_or_args)
        captured = self.captured_arrays()
        if captured or any(p.is_composite for p in params):
            return self.flattened(params).specialization(
                tuple(leaf for p in params for leaf in p.leaves())
                + tuple(param_of_arg(a) for a in captured))
        return self.specialization(params)

    def flattened(self, structure: tuple[Param, ...]) -> "Kernel":
        """This kernel taking the leaves of composite arguments (tuples, record arrays) as
        its arguments, then the GPU arrays it captures: how a launch with such arguments,
        or of a kernel that captures arrays, runs."""
        key = tuple(p.key() for p in structure)
        view = self._flat.get(key)
        if view is None:
            view = self._flat[key] = _Flattened(self, structure, self.captured_arrays())
        return view

    def captured_arrays(self) -> tuple:
        """The GPU arrays the kernel names at module level or in closures (passed by
        reference after the arguments at every launch)."""
        if self._captured is None:
            from .captured import captured_arrays
            self._captured = captured_arrays(self.py_func)
        return self._captured

    def specialization(self, params: tuple[Param, ...]) -> "Specialization":
        """The specialization for these parameters (made once, then shared)."""
        key = tuple(p.key() for p in params)
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = self._specialize(params)
        return spec

    def _specialize(self, params: tuple[Param, ...]) -> "Specialization":
        return Specialization(self, params)

    def specialization_for(self, args) -> "Specialization":
        fast_key = tuple(_arg_key(a) for a in args)
        spec = self._fast.get(fast_key)
        if spec is None:
            spec = self.specialization(tuple(param_of_arg(a) for a in args))
            self._fast[fast_key] = spec
        return spec

    def __repr__(self) -> str:
        return f"<zymo kernel {self.__name__}>"


class _Flattened(Kernel):
    """A kernel launched with composite arguments, which arrive as their leaves (a tuple's
    items, a record array's fields): the frontend sees the structure, the backends and the
    launch the leaves."""

    def __init__(self, kernel: Kernel, structure: tuple[Param, ...], captured: tuple):
        super().__init__(kernel.py_func, kernel.backend, kernel.boundscheck, kernel.fastmath,
                         max_registers=kernel.max_registers)
        self.structure = structure
        self.captured = captured
        self._captured = ()

    def _specialize(self, params: tuple[Param, ...]) -> "Specialization":
        leaves = iter(params)
        signature = tuple(p.rebuilt(leaves) for p in self.structure)
        return Specialization(self, params, signature, tuple(zip(self.captured, leaves)))


def _import_kernel(module: str, qualname: str, backend, boundscheck, fastmath,
                   max_registers=None) -> Kernel:
    import importlib
    found = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return Kernel(getattr(found, "py_func", found), backend, boundscheck, fastmath,
                  max_registers=max_registers)


# The zm.Tape objects recording launches (innermost last); empty almost always, so a launch
# pays one truth test for them.
RECORDING: list = []


class Launch:
    __slots__ = ("kernel", "grid", "block", "shared", "stream", "_cuda", "_fast")

    def __init__(self, kernel: Kernel, grid, block, shared: int, stream=None):
        self.kernel, self.grid, self.block, self.shared = kernel, grid, block, shared
        self.stream = stream
        self._cuda = None   # (launch plan, its configured state) of the last CUDA launch
        # the last CUDA launch's compiled launcher: it launches when the arguments have the
        # types that launch had (and returns 0), else launches nothing and returns non-zero
        self._fast = None

    def __call__(self, *args):
        if RECORDING:
            RECORDING[-1].record(self, args)
        fast = self._fast
        if fast is not None:
            try:
                if not fast(*args):
                    return
            except (TypeError, OverflowError):
                pass   # a value that does not fit its parameter: the general path names it
        self.general(args)

    def general(self, args) -> None:
        """The launch of arguments the compiled launcher does not take (the first launch,
        composites, captured arrays, other backends)."""
        kernel = self.kernel
        captured = kernel._captured if kernel._captured is not None else \
            kernel.captured_arrays()
        if captured or any(is_composite(a) for a in args):
            structure = tuple(param_of_arg(a) for a in args)
            flat = kernel.flattened(structure)[self.grid, self.block, self.stream, self.shared]
            return flat(*[leaf for a in args for leaf in flatten_arg(a)], *captured)
        backend = kernel.backend or _backend_of(args)
        if backend == "cuda":
            return (_cuda_launch or _load_cuda_launch())(self, args)
        spec = kernel.specialization_for(args)
        spec.launch(backend, self.grid, self.block, args, self.shared)


class Specialization(Job):
    """One compiled signature of a kernel: its IR at each stage and its backend artifacts,
    made by the compile driver (`zymo.runtime.compile`)."""

    _array_uses = None     # (written, read), found on first use

    def __init__(self, kernel: Kernel, params: tuple[Param, ...], signature=None,
                 captured: tuple = ()):
        super().__init__(kernel, params)
        # the parameters as the kernel sees them (composites whole), where they differ from
        # the leaves it is passed, and the captured GPU arrays passed after them: (array,
        # Param) pairs
        self.signature = signature
        self.captured = captured
        compile(self, "frontend")   # now: the kernel's own errors come at `specialize`

    def array_uses(self) -> tuple[set[int], set[int]]:
        """(written, read): the argument positions of the arrays the kernel may write and
        read, through views of them too (reshape, view(dtype), .real: a store through a view
        is a store into the argument); an array passed to a call (a recursive device
        function) counts as both. Found once (the optimized IR does not change): an evolution
        checks every evaluation's outputs by it."""
        if self._array_uses is None:
            self._array_uses = self._find_array_uses()
        written, read = self._array_uses
        return set(written), set(read)

    def _find_array_uses(self) -> tuple[frozenset, frozenset]:
        kernel = self.optimized.kernel
        params = kernel.regions[0].block.args
        written, read = set(), set()
        for op in kernel.walk():
            calls = op.has_trait(CallsFunction)
            for value in op.operands:
                origin = array_origin(value)
                if origin in params and isinstance(origin.type, Array):
                    if calls or op.has_trait(WritesMemory):
                        written.add(origin.index)
                    if calls or op.has_trait(ReadsMemory):
                        read.add(origin.index)
        return frozenset(written), frozenset(read)

    def ir(self, stage: str = "opt") -> str:
        """The IR as text: stage "frontend" (as lowered; for a derivative, "ad": as the
        transform made it), "opt" (after the passes) or "codegen" (as the CPU and CUDA
        backends lower it)."""
        if stage == "codegen":
            return str(self.codegen)
        return str(self.module if stage in ("frontend", "ad") else self.optimized)

    def llvm(self, target: str = "cpu", optimized: bool = True) -> str:
        compiled = self.compiled(target)
        return compiled.llvm_ir if not optimized else getattr(compiled, "optimized_llvm_ir",
                                                               compiled.llvm_ir)

    def ptx(self, arch: str = "sm_90") -> str:
        """The kernel as PTX for `arch` (the NVPTX backend; no GPU needed)."""
        return compile(self, f"ptx-{arch}").ptx

    def max_cooperative_grid_blocks(self, block, shared: int = 0,
                                    backend: str | None = None) -> int:
        """How many blocks of `block` threads a launch of a kernel that waits at grid.sync()
        may have (numba's name): on the GPU, the blocks that fit on it at once; on the CPU
        and the interpreter, whose blocks of such a kernel all run in lockstep, any number
        (2**31 - 1, the grid's limit). `backend`: default the GPU where one is usable."""
        from .cuda import driver
        if backend is None:
            backend = "cuda" if driver.is_available() else default_backend()
        if backend != "cuda":
            return 2**31 - 1
        from .cuda.launch import plan_of
        plan = plan_of(self.compiled("cuda"), driver.current_device())
        threads = 1
        for extent in normalize_dims(block, "block"):
            threads *= extent
        return driver.max_resident_blocks(plan.function, plan.device, threads, shared)

    def launch(self, backend: str, grid, block, args, shared: int = 0) -> None:
        if len(args) != len(self.params):
            raise LaunchError(f"{self.kernel.__name__} takes {len(self.params)} arguments, "
                              f"got {len(args)}")
        for k in self._written_positions():
            if isinstance(args[k], np.ndarray) and not args[k].flags.writeable:
                raise LaunchError(f"argument {k} of {self.kernel.__name__} is a read-only "
                                  f"NumPy array, and the kernel writes it: pass a writeable "
                                  f"array (a copy)")
        self.compiled(backend).launch(grid, block, _pass_args(args, self.params), shared)

    def _written_positions(self) -> tuple:
        written = getattr(self, "_written", None)
        if written is None:
            written = self._written = tuple(sorted(self.array_uses()[0]))
        return written


def _pass_args(args, params: tuple[Param, ...]) -> list:
    out = []
    for value, param in zip(args, params):
        if param.kind in ("array", "pointer"):   # a pointer arrives as the memory it points to
            out.append(value)
        elif isinstance(value, int) and param.type.is_int:
            out.append(_wrapped(value, param.type))
        else:
            out.append(param.type.dtype.type(value))
    return out


def _wrapped(value: int, t) -> np.generic:
    """A Python int as integer type `t`, keeping its low bits as a C cast does (numba passes
    0xFFFFFFFF to an int32 parameter as -1)."""
    bits = value & ((1 << t.bits) - 1)
    if t.is_signed and bits >> (t.bits - 1):
        bits -= 1 << t.bits
    return t.dtype.type(bits)


def check_max_registers(max_registers, auto: bool = False) -> None:
    """A register cap is None or an int from 16 to 255 (`auto`: or "auto", which zm.grad
    takes, to pick one by timing)."""
    if auto and isinstance(max_registers, str) and max_registers == "auto":
        return
    if max_registers is not None and (not isinstance(max_registers, int)
                                      or isinstance(max_registers, bool)
                                      or not 16 <= max_registers <= 255):
        also = ' or "auto" (the cap timed fastest at the first launch)' if auto else ""
        raise TypeError(f"max_registers must be an int from 16 to 255{also}, not "
                        f"{max_registers!r}")


def with_max_registers(kernel: Kernel, max_registers: int | None) -> Kernel:
    """`kernel` compiled with another register cap (its own specializations: the cap is part
    of what they compile)."""
    check_max_registers(max_registers)
    if max_registers is None or max_registers == kernel.max_registers:
        return kernel
    key = (max_registers, kernel.backend)
    capped = kernel._capped.get(key)
    if capped is None:
        capped = Kernel(kernel.py_func, kernel.backend, kernel.boundscheck, kernel.fastmath,
                        max_registers=max_registers)
        kernel._capped[key] = capped
    return capped


def separate_view(kernel: Kernel) -> Kernel:
    """`kernel` as an object of its own (its specializations, launch plans, capped copies and
    derivatives shared): what is kept on the object, such as the flattened views of composite
    arguments and the launches by configuration, is its own."""
    return Kernel(kernel.py_func, kernel.backend, kernel.boundscheck, kernel.fastmath,
                  kernel._specs, kernel._plans, kernel.max_registers, kernel._capped,
                  kernel._derived)


def kernel(py_func=None, *, backend: str | None = None, boundscheck: bool = False,
           fastmath: bool = False, max_registers: int | None = None, **numba_options):
    """Decorate a kernel (`@zm.kernel` or `@zm.kernel(boundscheck=True)`); also accepts a
    numba `@cuda.jit` dispatcher or its `py_func`. `max_registers` caps the registers per
    thread on the GPU (numba's option of that name; PTX `.maxnreg`)."""
    check_max_registers(max_registers)

    def wrap(fn):
        fn = getattr(fn, "py_func", fn)
        return Kernel(fn, backend=backend, boundscheck=boundscheck, fastmath=fastmath,
                      max_registers=max_registers)

    return wrap(py_func) if py_func is not None else wrap
