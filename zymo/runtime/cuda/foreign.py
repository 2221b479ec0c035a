"""Foreign device code for the GPU: CUDA C compiled to PTX by NVRTC, then everything the
program is linked with (lang/foreign.py's LinkSources) linked with the kernel's PTX by
nvJitLink into one cubin."""
from __future__ import annotations

import functools
import hashlib
import importlib
import os
import threading

from ...diagnostics import LaunchError
from ...lang.foreign import LinkSource
from . import driver

_lock = threading.Lock()
_ptx: dict[tuple, bytes] = {}


@functools.cache
def nvrtc():
    """cuda-bindings' NVRTC module, or a LaunchError saying what to install."""
    try:
        module = importlib.import_module("cuda.bindings.nvrtc")
        module.nvrtcVersion()
        return module
    except Exception as error:   # not installed, or libnvrtc is missing
        raise LaunchError(f"compiling CUDA C for the GPU needs NVRTC ({error})\nhint: pip install "
                          "cuda-bindings nvidia-cuda-nvrtc-cu12 (or a CUDA toolkit)") from None


def _check(result, program, what: str):
    """The values of an NVRTC call, or a LaunchError with the program's log."""
    module = nvrtc()
    code, *values = result if isinstance(result, tuple) else (result,)
    if code != module.nvrtcResult.NVRTC_SUCCESS:
        log = ""
        if program is not None:
            _, size = module.nvrtcGetProgramLogSize(program)
            buffer = b" " * size
            module.nvrtcGetProgramLog(program, buffer)
            log = buffer.decode(errors="replace").rstrip("\0").strip()
        raise LaunchError(f"NVRTC could not compile {what}:\n{log or code}")
    return values[0] if len(values) == 1 else values


@functools.cache
def include_folders() -> tuple[str, ...]:
    """CUDA's own headers (curand_kernel.h, cuda_fp16.h, ...) for NVRTC: $CUDA_HOME's include
    folder, or those of NVIDIA's pip wheels."""
    found = []
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.isdir(os.path.join(root, "include")):
            found.append(os.path.join(root, "include"))
            break
    try:
        import nvidia   # the wheels' namespace package: nvidia/<component>/include
        for base in nvidia.__path__:
            for component in sorted(os.listdir(base)):
                folder = os.path.join(base, component, "include")
                if os.path.isdir(folder):
                    found.append(folder)
    except ImportError:
        pass
    return tuple(found)


def compile_cuda_c(source: LinkSource, arch: str) -> bytes:
    """PTX (relocatable device code) for `arch` (e.g. "sm_90") from CUDA C `source`."""
    key = (source.digest, source.includes, arch)
    with _lock:
        found = _ptx.get(key)
    if found is not None:
        return found
    module = nvrtc()
    program = _check(module.nvrtcCreateProgram(source.data, source.name.encode(), 0, [], []),
                     None, source.name)
    try:
        folders = [source.folder, *source.includes, *include_folders()]
        options = [f"--gpu-architecture={arch.replace('sm_', 'compute_')}", "-rdc=true",
                   *[f"-I{folder}" for folder in folders if folder]]
        encoded = [o.encode() for o in options]
        _check(module.nvrtcCompileProgram(program, len(encoded), encoded), program, source.name)
        size = _check(module.nvrtcGetPTXSize(program), program, source.name)
        buffer = b" " * size
        _check(module.nvrtcGetPTX(program, buffer), program, source.name)
    finally:
        module.nvrtcDestroyProgram(program)
    ptx = buffer.rstrip(b"\0")
    with _lock:
        _ptx[key] = ptx
    return ptx


def link_inputs(sources: tuple[LinkSource, ...], arch: str) -> list[tuple[str, bytes, str]]:
    """(nvJitLink input kind, data, name) of each source, CUDA C compiled first."""
    return [("ptx", compile_cuda_c(s, arch), s.name) if s.kind == "cu" else
            (s.kind, s.data, s.name) for s in sources]


def cubin_key(ptx_hash: str, sources: tuple[LinkSource, ...], arch: str, version) -> str:
    parts = [ptx_hash, arch, str(version)] + [f"{s.digest}{s.includes}" for s in sources]
    return hashlib.sha256(" ".join(parts).encode()).hexdigest()


def link(ptx: str, sources: tuple[LinkSource, ...], arch: str) -> bytes:
    """The cubin of the kernel's `ptx` linked with `sources`."""
    if driver.nvjitlink_version() is None:
        raise LaunchError("linking foreign device code (link=...) needs nvJitLink\nhint: pip "
                          "install nvidia-nvjitlink-cu12 cuda-bindings")
    return driver.link_ptx(ptx, arch, link_inputs(sources, arch))
