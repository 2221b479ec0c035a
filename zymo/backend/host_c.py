"""Foreign CUDA C device functions compiled for the host, so that kernels calling them run on
the CPU backend and the interpreter as they do on the GPU.

The sources are compiled together, as C++ with CUDA's function qualifiers defined away, into
one shared library per set of sources (a source may call a function another defines, as the
GPU link allows). CUDA-only parts (thread indices, barriers, CUDA headers) do not compile for
the host: the compiler's message is the error, with the GPU as the way out.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass

from ..diagnostics import CompileError, Diagnostic, Loc

# CUDA C's qualifiers mean nothing on the host; `extern "C"` and templates are plain C++.
# NVRTC declares size_t, the fixed-width integers, math functions and printf without
# includes: so does this.
PRELUDE = """\
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstdio>
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
"""

_lock = threading.Lock()
_libraries: dict[str, "HostLibrary"] = {}


@dataclass
class HostLibrary:
    digest: str
    handle: ctypes.CDLL

    def address(self, symbol: str, loc: Loc | None) -> int:
        try:
            return ctypes.cast(getattr(self.handle, symbol), ctypes.c_void_p).value or 0
        except AttributeError:
            raise CompileError(Diagnostic(loc or Loc("<link>", 0, 0),
                                          f"no function `{symbol}` in the linked sources",
                                          "declare it `extern \"C\" __device__` in a .cu file "
                                          "given to link=")) from None

    def function(self, callee, loc: Loc | None):
        """A ctypes function for foreign function `callee` (lang/foreign.py), with its ABI
        (numba's: int f(out*, args...); C's: out f(args...))."""
        address = self.address(callee.symbol, loc)
        params = [ctypes.c_void_p if getattr(t, "ndim", None) is not None
                  else _CTYPES[t.dtype.str[1:]] for t in callee.inputs]
        if callee.abi == "c":
            result = None if callee.output is None else _CTYPES[callee.output.dtype.str[1:]]
            return ctypes.CFUNCTYPE(result, *params)(address)
        return ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *params)(address)


_CTYPES = {"i1": ctypes.c_int8, "i2": ctypes.c_int16, "i4": ctypes.c_int32,
           "i8": ctypes.c_int64, "u1": ctypes.c_uint8, "u2": ctypes.c_uint16,
           "u4": ctypes.c_uint32, "u8": ctypes.c_uint64, "f4": ctypes.c_float,
           "f8": ctypes.c_double, "b1": ctypes.c_bool}


def compiler() -> str | None:
    """The host's C++ compiler: $CXX, else c++, g++ or clang++ from PATH."""
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def library(sources: tuple, loc: Loc | None = None) -> HostLibrary:
    """The host library of `sources` (lang/foreign.py's LinkSources, CUDA C only), compiled
    once per process."""
    where = loc or Loc("<link>", 0, 0)
    foreign = [s for s in sources if s.kind != "cu"]
    if foreign:
        raise CompileError(Diagnostic(where, f"{foreign[0].name} is {foreign[0].kind} code, "
                                      "which runs only on an NVIDIA GPU",
                                      "launch on the GPU, or link CUDA C (.cu) sources, which "
                                      "zymo also compiles for the CPU"))
    key = hashlib.sha256(repr([(s.digest, s.includes) for s in sources]).encode()).hexdigest()
    with _lock:
        found = _libraries.get(key)
        if found is None:
            found = _libraries[key] = _build(sources, key[:16], where)
    return found


def _build(sources, digest: str, loc: Loc) -> HostLibrary:
    cxx = compiler()
    if cxx is None:
        raise CompileError(Diagnostic(loc, "calling CUDA C on the CPU needs a C++ compiler, and "
                                      "none was found (c++, g++, clang++ or $CXX)",
                                      "install g++ or clang++, or launch on the GPU"))
    folder = tempfile.mkdtemp(prefix=f"zymo-host-{digest}-")
    prelude = os.path.join(folder, "zymo_cuda_prelude.h")
    with open(prelude, "w") as f:
        f.write(PRELUDE)
    objects = []
    for k, source in enumerate(sources):
        path = os.path.join(folder, f"source{k}.cpp")
        with open(path, "wb") as f:   # the compiler's messages name the source, not the copy
            f.write(b'#line 1 "' + source.name.encode().replace(b'"', b"'") + b'"\n' + source.data)
        dirs = [d for d in (source.folder, *source.includes) if d]
        obj = path[:-4] + ".o"
        _run([cxx, "-x", "c++", "-std=c++17", "-O2", "-fPIC", "-c", "-include", prelude,
              *[f"-I{d}" for d in dirs], path, "-o", obj], source.name, loc)
        objects.append(obj)
    shared = os.path.join(folder, f"libzymo_foreign_{digest}.so")
    _run([cxx, "-shared", "-Wl,-z,defs", *objects, "-o", shared], "the link", loc)
    return HostLibrary(digest, ctypes.CDLL(shared))


def _run(command: list[str], what: str, loc: Loc) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        log = (done.stderr or done.stdout).strip().splitlines()
        raise CompileError(Diagnostic(loc, f"compiling {what} for the CPU failed:\n" +
                                      "\n".join(log[:20]),
                                      "CUDA-only code (threadIdx, __syncthreads, CUDA headers) "
                                      "runs only on the GPU: launch there"))
