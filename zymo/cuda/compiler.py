"""numba's `cuda.compile_ptx` and relatives: Python functions compiled to PTX through zymo,
without a GPU.

A kernel (`device=False`) is compiled as `@cuda.jit` compiles it, for the signature's argument
types. zymo inlines device functions into the kernels that call them, so a device function
(`device=True`) is compiled inside a kernel that stores its result to an array
(`out[0] = f(args)`): its code, with the store of the result, is what the PTX holds; the return
type is the one the signature gives, else the one zymo infers.
"""
from __future__ import annotations

import builtins
import itertools
import linecache

from ..runtime.compile import compile as compile_job
from . import types as nt
from .core import config

_COUNTER = itertools.count()


def _arch(cc) -> str:
    major, minor = cc if cc is not None else config.CUDA_DEFAULT_PTX_CC
    return f"sm_{int(major)}{int(minor)}"


def _split(sig):
    """(argument types, return type or None) of a signature, its text, or argument types."""
    if isinstance(sig, str):
        sig = nt.parse(sig)
    if isinstance(sig, nt.Signature):
        return sig.args, sig.return_type
    if isinstance(sig, nt.Type):
        return (sig,), None
    return tuple(nt.parse(a) if isinstance(a, str) else a for a in sig), None


def _kernel_options(pyfunc, fastmath, debug, lineinfo, opt):
    from .dispatcher import Dispatcher
    options = {"fastmath": fastmath, "debug": bool(debug), "lineinfo": lineinfo, "opt": opt}
    return Dispatcher(getattr(pyfunc, "py_func", pyfunc), (), options)


def _device_wrapper(pyfunc, nargs: int, returns: bool):
    """A kernel calling `pyfunc` with its arguments and storing what it returns to `out[0]`,
    written as source (zymo compiles kernels from source) and registered with linecache."""
    names = ", ".join(f"a{i}" for i in range(nargs))
    name = f"_compile_ptx_{getattr(pyfunc, '__name__', 'function')}_{next(_COUNTER)}"
    body = f"out[0] = device_function({names})" if returns else f"device_function({names})"
    head = f"out, {names}" if returns and names else ("out" if returns else names)
    source = f"def {name}({head}):\n    {body}\n"
    filename = f"<zymo.cuda.compile_ptx {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"device_function": pyfunc}
    exec(builtins.compile(source, filename, "exec"), namespace)   # noqa: S102 - our own source
    return namespace[name]


def _returned_type(spec):
    """The numba type of what the wrapper's device call returns, from zymo's typed IR."""
    for op in spec.module.kernel.walk():
        if op.name == "func.call" and op.results:
            return nt.from_dtype(op.results[0].type.dtype)
    return nt.void


def compile(pyfunc, sig, debug=None, lineinfo=False, device=True, fastmath=False, cc=None,   # noqa: A001
            opt=None, abi="c", abi_info=None, output="ptx", forceinline=False,
            launch_bounds=None):
    """(PTX text, return type) of `pyfunc` for the signature `sig` (argument types, or a full
    signature): a kernel when `device` is False, else a device function (see the module's
    note). `cc` is the (major, minor) compute capability (config.CUDA_DEFAULT_PTX_CC when
    None). zymo writes PTX only: `output` must be "ptx"."""
    if output != "ptx":
        raise ValueError(f"compile(output={output!r}): zymo writes PTX only (output='ptx'); "
                         f"it produces no LTO-IR")
    if launch_bounds is not None:
        raise ValueError("compile(launch_bounds=...): zymo sets no launch bounds; leave it out")
    args, restype = _split(sig)
    arch = _arch(cc)
    if not device:
        if restype not in (None, nt.void):
            raise TypeError(f"{pyfunc.__name__}: a kernel returns void, not {restype}")
        kernel = _kernel_options(pyfunc, fastmath, debug, lineinfo, opt)
        spec = kernel.compile(nt.Signature(nt.void, tuple(args)))
        return compile_job(spec, f"ptx-{arch}").ptx, nt.void
    probe = nt.float64 if restype in (None, nt.void) else restype
    wrapper = _device_wrapper(getattr(pyfunc, "py_func", pyfunc), len(args),
                              restype != nt.void)
    kernel = _kernel_options(wrapper, fastmath, debug, lineinfo, opt)
    params = (probe[::1],) + tuple(args) if restype != nt.void else tuple(args)
    spec = kernel.compile(nt.Signature(nt.void, params))
    if restype is None:
        restype = _returned_type(spec)
        if restype == nt.void:
            wrapper = _device_wrapper(getattr(pyfunc, "py_func", pyfunc), len(args), False)
            spec = _kernel_options(wrapper, fastmath, debug, lineinfo, opt).compile(
                nt.Signature(nt.void, tuple(args)))
        elif restype != probe:
            spec = kernel.compile(nt.Signature(nt.void, (restype[::1],) + tuple(args)))
    return compile_job(spec, f"ptx-{arch}").ptx, restype


def compile_for_current_device(pyfunc, sig, debug=None, lineinfo=False, device=True,
                               fastmath=False, opt=None, abi="c", abi_info=None, output="ptx",
                               forceinline=False, launch_bounds=None):
    """`compile` for the current device's compute capability (sm_90 without a GPU)."""
    from .cudadrv.devices import get_current_device
    return compile(pyfunc, sig, debug=debug, lineinfo=lineinfo, device=device,
                   fastmath=fastmath, cc=get_current_device().compute_capability, opt=opt,
                   abi=abi, abi_info=abi_info, output=output, forceinline=forceinline,
                   launch_bounds=launch_bounds)


def compile_ptx(pyfunc, sig, debug=None, lineinfo=False, device=False, fastmath=False, cc=None,
                opt=None, abi="numba", abi_info=None, forceinline=False, launch_bounds=None):
    """(PTX, return type): `compile` with a kernel by default."""
    return compile(pyfunc, sig, debug=debug, lineinfo=lineinfo, device=device,
                   fastmath=fastmath, cc=cc, opt=opt, abi=abi, abi_info=abi_info, output="ptx",
                   forceinline=forceinline, launch_bounds=launch_bounds)


def compile_ptx_for_current_device(pyfunc, sig, debug=None, lineinfo=False, device=False,
                                   fastmath=False, opt=None, abi="numba", abi_info=None,
                                   forceinline=False, launch_bounds=None):
    """`compile_ptx` for the current device's compute capability."""
    from .cudadrv.devices import get_current_device
    return compile_ptx(pyfunc, sig, debug=debug, lineinfo=lineinfo, device=device,
                       fastmath=fastmath, cc=get_current_device().compute_capability, opt=opt,
                       abi=abi, abi_info=abi_info, forceinline=forceinline,
                       launch_bounds=launch_bounds)
