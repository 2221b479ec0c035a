"""`cuda.jit`: numba's decorator on zymo's kernels. A kernel is a `zymo.Kernel` (the same
launch path and cost: `kernel[grid, block](...)` is Kernel's), with numba's signatures, options
and introspection on top; `device=True` makes a `zm.func` device function.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..diagnostics import LaunchError
from ..ir import types as T
from ..lang.decorators import DeviceFunction
from ..lang.foreign import link_sources
from ..lang.params import Param
from ..runtime.compile import compile as compile_job
from ..runtime.cuda.arguments import pointer_argument
from ..runtime.cuda.launch import WARN_ON_HOST_COPY, warn_low_occupancy
from ..runtime.kernel import Kernel, Launch
from . import mode
from . import types as nt
from .core import config as flags
from .core.errors import normalize_kernel_dimensions
from .args import ArgHint
from .cudadrv.devicearray import foreign_arrays_for_launch, warn_if_host_copy
from .foreign import include_paths

# numba's option names cuda.jit takes; what zymo has no counterpart for is accepted and noted
KNOWN_OPTIONS = {"fastmath", "max_registers", "lineinfo", "debug", "opt", "cache", "inline",
                 "boundscheck", "launch_bounds", "lto", "link", "extensions", "forceinline",
                 "restype", "argtypes", "nopython", "target"}


class UnconfiguredLaunch(LaunchError, ValueError):
    """A kernel called without `[grid, block]` (a ValueError, as numba raises)."""


class _NumbaLaunch(Launch):
    """`kernel[grid, block]` of a `@cuda.jit` kernel. What the compiled launcher takes
    launches as from `zm.kernel`; other arguments first go through numba's launch-time rules:
    the kernel's `extensions` (`prepare_args`), transfer hints (`cuda.In/Out/InOut`), and
    addresses given for `CPointer` parameters (the memory they point to)."""

    __slots__ = ()

    def general(self, args) -> None:
        kernel = self.kernel
        # (the first launch with new argument types comes here; a GPU launch warns as it copies)
        if WARN_ON_HOST_COPY[0] and not mode.on_gpu():
            warn_if_host_copy(kernel, args)
        args = foreign_arrays_for_launch(args, self.stream)
        retrieve: list = []
        if kernel.extensions:
            from .typing.typeof import typeof
            prepared = []
            for value in args:
                kind = typeof(value) if not isinstance(value, ArgHint) else None
                for extension in kernel.extensions:
                    kind, value = extension.prepare_args(kind, value, stream=self.stream,
                                                         retr=retrieve)
                prepared.append(value)
            args = prepared
        Launch.general(self, [self._passed(k, a, retrieve) for k, a in enumerate(args)])
        for bring_back in retrieve:
            bring_back()

    def _passed(self, position: int, value, retrieve: list):
        """What the launch passes for argument `value`: a hinted array where its hint puts
        it, the memory at an address given for a CPointer parameter, else the value."""
        if isinstance(value, ArgHint):
            return value.to_device(retrieve)
        pointer = self.kernel._pointers.get(position)
        if pointer is None or hasattr(value, "__array_interface__") or \
                hasattr(value, "__cuda_array_interface__"):
            return value
        return pointer_argument(value, pointer, self.kernel.backend or "cpu")


class Dispatcher(Kernel):
    """A `@cuda.jit` kernel. Without signatures it is compiled per argument types at launch, as
    `zm.kernel` is; with signatures each is compiled now, and launches convert scalar arguments
    to the declared types."""

    callable_from_kernels = True   # a kernel called from a kernel is compiled as a device call
    launch_class = _NumbaLaunch

    def __init__(self, py_func, sigs=(), options: dict | None = None):
        options = dict(options or {})
        self.targetoptions = options
        Kernel.__init__(self, py_func, None,
                        boundscheck=bool(options.get("boundscheck") or options.get("debug")),
                        fastmath=bool(options.get("fastmath")),
                        max_registers=options.get("max_registers"))
        self._declared: list = []
        self._pointers: dict = {}    # position -> array type, of CPointer parameters
        self.extensions = list(options.get("extensions") or ())   # numba's launch hooks
        # numba's `link=`: CUDA C/PTX/... the kernel's foreign functions come from
        self.link = link_sources(options.get("link"), include_paths())
        for sig in sigs:
            self.compile(sig)

    # where launches go: the GPU when zymo.cuda has one, else where zm.kernel would run
    @property
    def backend(self):
        return "cuda" if mode.on_gpu() else None

    @backend.setter
    def backend(self, value):
        if value is not None:
            raise AttributeError("a cuda.jit kernel runs where zymo.cuda's arrays live; for "
                                 "another backend use kernel.on(name)")

    def _configure(self, config):
        if isinstance(config, tuple) and len(config) >= 2:   # numba's errors and messages
            normalize_kernel_dimensions(config[0], config[1])
        launch = Kernel._configure(self, config)
        # numba's CUDA_LOW_OCCUPANCY_WARNINGS, on the GPU or not; once per kernel and
        # configuration, as zymo keeps configured launches
        if flags.performance_warnings("CUDA_LOW_OCCUPANCY_WARNINGS"):
            warn_low_occupancy(math.prod(launch.grid), stacklevel=3)
        return launch

    def __call__(self, *args, **kwargs):
        raise UnconfiguredLaunch(f"{self.__name__}: the launch configuration was not specified; "
                                 f"launch as {self.__name__}[blocks, threads](...)")

    def compile(self, sig):
        """Compile for one signature (numba's `Dispatcher.compile`): its specialization."""
        signature = nt.signature_of(sig)
        if signature.return_type != nt.void:
            args = ", ".join(map(str, signature.args))
            raise TypeError(f"{self.__name__}: a kernel returns void, not "
                            f"{signature.return_type}; write void({args}) or use device=True "
                            f"for a device function")
        spec = Kernel.specialization(self, tuple(nt.param_of(a) for a in signature.args))
        if spec not in self._declared:
            self._declared.append(spec)
        for k, param in enumerate(spec.params):
            if param.kind == "pointer":
                self._pointers[k] = param.type
        return spec

    def specialize(self, *args):
        """numba's: a dispatcher compiled for these arguments' types alone (`args`: values, or
        numba types); a dispatcher with one signature is specialized already."""
        if self.specialized:
            raise RuntimeError(f"{self.__name__}: the dispatcher is specialized already")
        from ..runtime.cuda.arguments import param_of_arg
        params = tuple(nt.param_of(a) if isinstance(a, nt.Type) else param_of_arg(a)
                       for a in args)
        specialized = Dispatcher(self.py_func, (), self.targetoptions)
        specialized._declared.append(Kernel.specialization(specialized, params))
        return specialized

    def specialization(self, params: tuple[Param, ...]):
        if not self._declared:
            return Kernel.specialization(self, params)
        for spec in self._declared:
            if _converts(params, spec.params):
                return spec
        given = ", ".join(str(nt.of_param(p)) for p in params)
        declared = "\n".join(f"  ({', '.join(map(str, key))})" for key in self._keys())
        raise TypeError(f"No matching definition for argument type(s) {given} of "
                        f"{self.__name__}; it was compiled for:\n{declared}")

    # ---- numba's introspection ---------------------------------------------------------------
    def _keys(self):
        keys = [tuple(nt.of_param(p) for p in spec.params) for spec in self._specs.values()]
        for flat in self._flat.values():     # launches with record arrays or tuples
            keys += [tuple(nt.of_param(p) for p in spec.signature)
                     for spec in flat._specs.values() if spec.signature is not None]
        return keys

    @property
    def overloads(self) -> dict:
        """{argument types: the compiled kernel} for each signature compiled so far."""
        return {tuple(nt.of_param(p) for p in spec.params): Overload(spec)
                for spec in self._specs.values()}

    @property
    def signatures(self) -> list:
        return self._keys()

    @property
    def specialized(self) -> bool:
        return len(self._declared) == 1

    def _each(self, signature, what):
        overloads = self.overloads
        if signature is not None:
            key = tuple(nt.signature_of(signature).args)
            if key not in overloads:
                raise KeyError(f"{self.__name__} has no compiled signature {key}")
            return what(overloads[key])
        return {key: what(overload) for key, overload in overloads.items()}

    def inspect_llvm(self, signature=None):
        """The LLVM IR the PTX is made from, per signature (one, given a signature)."""
        return self._each(signature, Overload.inspect_llvm)

    def inspect_asm(self, signature=None):
        """The PTX for the current device (sm_90 without one), per signature."""
        return self._each(signature, Overload.inspect_asm)

    inspect_ptx = inspect_asm
    # numba links LTO-IR and shows the PTX of the result; zymo's PTX is already the whole
    # program (device functions inlined, libdevice linked), so it is the same text
    inspect_lto_ptx = inspect_asm

    def inspect_sass(self, signature=None):
        """The SASS, disassembled from ptxas's cubin with nvdisasm (both from the CUDA
        toolkit, found on PATH or under $CUDA_HOME)."""
        return self._each(signature, Overload.inspect_sass)

    def inspect_types(self, file=None, signature=None):
        """zymo's typed IR of each signature (numba prints its typed Python; zymo's IR names
        the types of every value, with the source line)."""
        text = self._each(signature, lambda o: o.spec.ir("frontend"))
        out = file or sys.stdout
        for key, ir in (text.items() if isinstance(text, dict) else [(signature, text)]):
            print(f"{self.__name__} {key}\n{'-' * 80}\n{ir}\n{'=' * 80}", file=out)

    def get_regs_per_thread(self, signature=None):
        return self._each(signature, Overload.get_regs_per_thread)

    def forall(self, ntasks: int, tpb: int = 0, stream=0, sharedmem: int = 0):
        """A launch of `ntasks` threads, `tpb` per block (128 unless given)."""
        ntasks = int(ntasks)
        if ntasks < 0:
            raise ValueError(f"forall: Can't create ForAll with negative task count {ntasks}: "
                             f"pass the number of elements (0 or more)")
        tpb = int(tpb) or 128
        return self[max(1, math.ceil(ntasks / tpb)), tpb, stream, sharedmem]

    def __repr__(self) -> str:
        return f"<zymo.cuda kernel {self.__name__}>"


def _converts(given: tuple, declared: tuple) -> bool:
    """Whether arguments typed `given` can be passed to a signature of `declared` params:
    arrays of the same element type and rank (and layout where C is declared), any number for
    a scalar (converted as the launch passes it)."""
    if len(given) != len(declared):
        return False
    for have, want in zip(given, declared):
        have_array, want_array = have.kind == "array", want.kind in ("array", "pointer")
        if have_array != want_array:
            return False
        if want_array:
            a, b = have.type, want.type
            if (a.dtype, a.ndim) != (b.dtype, b.ndim) or (b.layout == "C" and a.layout != "C"):
                return False
    return True


class Overload:
    """One compiled signature of a kernel (numba's `_Kernel`)."""

    def __init__(self, spec):
        self.spec = spec

    @property
    def py_func(self):
        return self.spec.kernel.py_func

    @property
    def signature(self):
        return nt.Signature(nt.void, tuple(nt.of_param(p) for p in self.spec.params))

    def _ptx(self):
        return compile_job(self.spec, f"ptx-{_arch()}")

    @property
    def cooperative(self) -> bool:
        """Whether the kernel syncs its grid (and is launched cooperatively)."""
        from ..ir.traits import GridSync
        return self.spec.optimized.any_op(GridSync)

    def inspect_llvm(self) -> str:
        return self._ptx().llvm_ir

    def inspect_asm(self) -> str:
        return self._ptx().ptx

    def inspect_sass(self) -> str:
        return disassemble(self._ptx().ptx, _arch())

    def get_regs_per_thread(self) -> int:
        from ..backend.nvptx import ptxas
        return ptxas.assemble(self._ptx().ptx, _arch()).registers

    def max_cooperative_grid_blocks(self, blockdim) -> int:
        """How many blocks of `blockdim` threads can run at once (a grid that syncs must);
        where zymo.cuda runs on the CPU, any number."""
        return self.spec.max_cooperative_grid_blocks(
            blockdim, backend="cuda" if mode.on_gpu() else "cpu")


def _arch() -> str:
    if mode.on_gpu():
        from ..runtime.cuda import driver
        return driver.current_device().arch
    from ..backend.nvptx.machine import DEFAULT_ARCH
    return DEFAULT_ARCH


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / name).is_file():
            return str(Path(root) / "bin" / name)
    return None


def disassemble(ptx: str, arch: str) -> str:
    """SASS of `ptx` for `arch`: ptxas to a cubin, nvdisasm to text."""
    ptxas, nvdisasm = _tool("ptxas"), _tool("nvdisasm")
    missing = [name for name, path in (("ptxas", ptxas), ("nvdisasm", nvdisasm)) if path is None]
    if missing:
        raise RuntimeError(f"inspect_sass needs {' and '.join(missing)} from the CUDA toolkit: "
                           f"put its bin folder on PATH or set CUDA_HOME")
    with tempfile.TemporaryDirectory(prefix="zymo-sass-") as folder:
        source, cubin = Path(folder, "k.ptx"), Path(folder, "k.cubin")
        source.write_text(ptx)
        for command in ([ptxas, f"-arch={arch}", str(source), "-o", str(cubin)],
                        [nvdisasm, str(cubin)]):
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"{Path(command[0]).name} failed:\n{done.stderr}")
    return done.stdout


class DeviceDispatcher(DeviceFunction):
    """A `@cuda.jit(device=True)` function: zymo's `zm.func`, compiled where kernels call it."""

    def __init__(self, py_func, sigs=(), options: dict | None = None):
        options = dict(options or {})
        inline = options.get("inline", options.get("forceinline", True))
        super().__init__(py_func, inline=inline not in ("never", False))
        self.targetoptions = options
        self.signatures = [nt.signature_of(s) for s in sigs]
        if len(self.signatures) == 1:   # calls convert their numbers to the declared types
            self.param_types = tuple(nt.param_of(a).type for a in self.signatures[0].args)
            returned = self.signatures[0].return_type
            if returned != nt.void and isinstance(nt.param_of(returned).type, T.Scalar):
                self.return_type = nt.param_of(returned).type

    def __getitem__(self, config):
        raise RuntimeError(f"Cannot compile a device function as a kernel: {self.__name__} is "
                           f"cuda.jit(device=True); call it from a kernel, or drop device=True")

    def inspect_sass(self, signature=None):
        raise RuntimeError(f"Cannot inspect SASS of a device function: {self.__name__} has no "
                           f"kernel of its own; inspect_asm() shows its PTX")

    def inspect_asm(self, signature=None):
        """PTX for the current device of a kernel computing this function (zymo inlines device
        functions; see cuda.compile_ptx), per signature declared (one, given a signature)."""
        from .compiler import compile_for_current_device
        options = {k: self.targetoptions[k] for k in ("fastmath", "debug", "lineinfo", "opt")
                   if k in self.targetoptions}

        def ptx(sig):
            return compile_for_current_device(self.py_func, sig, device=True, **options)[0]

        if signature is not None:
            return ptx(signature)
        return {tuple(sig.args): ptx(sig) for sig in self.signatures}

    inspect_ptx = inspect_asm

    def __repr__(self) -> str:
        return f"<zymo.cuda device function {self.py_func.__qualname__}>"


def jit(func_or_sig=None, device: bool = False, **options):
    """numba's `cuda.jit`: `@cuda.jit`, `@cuda.jit("void(float32[:], int32)")`,
    `@cuda.jit([sig, ...])`, `@cuda.jit(device=True)`, with numba's options (`fastmath`,
    `max_registers`, `debug` (bounds checks), `lineinfo`, `opt`, `cache`, `inline`, ...)."""
    unknown = set(options) - KNOWN_OPTIONS
    if unknown:
        raise TypeError(f"cuda.jit got unknown option(s) {', '.join(sorted(unknown))}; it takes "
                        f"{', '.join(sorted(KNOWN_OPTIONS))}")
    # numba's defaults (config.CUDA_DEBUGINFO_DEFAULT, config.OPT) and its warnings
    options["debug"], _ = flags.resolve_debug_opt(options.get("debug"), options.get("opt"),
                                                  options.get("lineinfo"))
    make = DeviceDispatcher if device else Dispatcher

    def decorate(fn, sigs=()):
        fn = getattr(fn, "py_func", fn)
        return make(fn, sigs, options)

    if func_or_sig is None:
        return decorate
    if callable(func_or_sig) and not isinstance(func_or_sig, (nt.Type, str)):
        return decorate(func_or_sig)
    sigs = func_or_sig if isinstance(func_or_sig, list) else [func_or_sig]
    return lambda fn: decorate(fn, sigs)
