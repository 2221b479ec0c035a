"""Caches of compiled CUDA code: loaded modules in memory per (PTX hash, device); PTX and cubin on
disk, so a new process skips LLVM and nvJitLink.

Disk keys: PTX by a hash of the optimized IR text (which holds every inlined device function and
captured constant), the arch, the options, the zymo and llvmlite versions and a fingerprint of
the compiler's own source; cubin by a hash of the PTX, the arch and the nvJitLink version.
Entries are written atomically (temporary file + os.replace) and carry a SHA-256 of their
content: a corrupt or truncated entry is deleted and rebuilt, never trusted.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
from pathlib import Path

from ...diagnostics import InternalError, LaunchError, Loc
from ...ir.traits import GridSync
from ...backend.llvm.module import raises
from ...backend.nvptx.target import warp_sum_switches
from . import driver, foreign
from .driver import CudaError

MAGIC = b"zymo-cache 1\n"
stats = {"ptx_hit": 0, "ptx_miss": 0, "cubin_hit": 0, "cubin_miss": 0, "corrupt": 0,
         "module_hit": 0, "module_load": 0}
_modules: dict[tuple[str, int], object] = {}
_modules_lock = threading.Lock()


# ---- the disk ------------------------------------------------------------------------------
def cache_dir() -> Path:
    """$ZYMO_CACHE_DIR, else the user cache directory ($XDG_CACHE_HOME or ~/.cache) + zymo."""
    explicit = os.environ.get("ZYMO_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "zymo"


def disk_enabled() -> bool:
    return os.environ.get("ZYMO_CACHE", "1") != "0"


def _entry_path(key: str, suffix: str) -> Path:
    return cache_dir() / "cuda" / key[:2] / f"{key}.{suffix}"


def write_entry(path: Path, meta: dict, payload: bytes) -> None:
    """Write `meta` and `payload` under `path` atomically; a failure to write only costs speed."""
    body = json.dumps(meta, sort_keys=True).encode() + b"\n" + payload
    header = MAGIC + f"{hashlib.sha256(body).hexdigest()} {len(body)}\n".encode()
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "wb") as stream:
            stream.write(header + body)
        os.replace(temporary, path)   # readers see the old entry or the whole new one
    except OSError:
        try:
            temporary.unlink()
        except OSError:
            pass


def read_entry(path: Path) -> tuple[dict, bytes] | None:
    """(meta, payload) of a sound entry; None when it is missing or damaged (then deleted)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        if not data.startswith(MAGIC):
            raise ValueError("bad magic")
        line_end = data.index(b"\n", len(MAGIC))
        digest, length = data[len(MAGIC):line_end].decode().split()
        body = data[line_end + 1:]
        if len(body) != int(length) or hashlib.sha256(body).hexdigest() != digest:
            raise ValueError("checksum")
        meta_end = body.index(b"\n")
        return json.loads(body[:meta_end]), body[meta_end + 1:]
    except (ValueError, UnicodeDecodeError):
        stats["corrupt"] += 1
        try:
            path.unlink()
        except OSError:
            pass
        return None


def clear() -> int:
    """Delete zymo's CUDA entries from the cache directory; returns how many files went."""
    root = cache_dir() / "cuda"
    count = sum(1 for entry in root.rglob("*") if entry.is_file()) if root.exists() else 0
    shutil.rmtree(root, ignore_errors=True)
    return count


_fingerprint: str | None = None


def compiler_fingerprint() -> str:
    """llvmlite's version and a hash of the code that writes PTX and of zymo's `__init__.py`
    (which holds its version), so that editing the compiler (even without a version bump) never
    reuses stale PTX."""
    global _fingerprint
    if _fingerprint is None:
        import llvmlite

        root = Path(__file__).parents[2]   # the package zymo, read as files, not imported
        digest = hashlib.sha256(llvmlite.__version__.encode())
        digest.update((root / "__init__.py").read_bytes())
        for package in ("backend", "ops", "passes"):
            for source in sorted((root / package).rglob("*.py")):
                digest.update(source.relative_to(root).as_posix().encode())
                digest.update(source.read_bytes())
        _fingerprint = digest.hexdigest()
    return _fingerprint


def ptx_key(ir_text: str, arch: str, options: dict) -> str:
    text = json.dumps({"ir": ir_text, "arch": arch, "options": options,
                       "compiler": compiler_fingerprint()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


# ---- programs ------------------------------------------------------------------------------
class CudaProgram:
    """A kernel's PTX (and cubin, where nvJitLink made one) for one arch, loaded per device."""

    def __init__(self, name: str, ptx: str, kernel_name: str, arch: str, params,
                 cubin: bytes | None = None, bounds_sites: tuple | None = None):
        self.name, self.ptx, self.kernel_name, self.arch = name, ptx, kernel_name, arch
        self.params = tuple(params)
        self.cubin = cubin
        # with bounds checking the .entry takes an error buffer last; sites are (array, Loc)
        self.bounds_sites = bounds_sites
        self.ptx_hash = hashlib.sha256(ptx.encode()).hexdigest()
        self.plans: dict = {}          # device -> LaunchPlan (runtime/cuda/launch.py)
        self.load_note = ""           # why the cubin was not used, when it was not
        # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT (percent), None: the driver's
        self.shared_carveout: int | None = None
        # the arrays compiled `noalias` (passes/alias.PrivateArrays) and how to get the build
        # without, for launches that break their conditions; None: nothing assumed
        self.private = None
        self.aliased = None
        # the kernel waits at grid barriers: launched with cuLaunchCooperativeKernel
        self.cooperative = False

    def function(self, device):
        """The CUfunction of the kernel in `device`'s context (modules are shared per PTX)."""
        key = (self.ptx_hash, device.ordinal)
        with _modules_lock:
            module = _modules.get(key)
            if module is None:
                stats["module_load"] += 1
                module = _modules[key] = self._load(device)
            else:
                stats["module_hit"] += 1
        return driver.get_function(module, self.kernel_name)

    def _load(self, device):
        if self.cubin is not None and device.arch == self.arch:
            try:
                return driver.load_module(device, self.cubin)
            except CudaError as error:   # e.g. nvJitLink newer than the driver
                self.load_note = f"cubin rejected ({error}); PTX JIT-compiled by the driver"
        return driver.load_module(device, self.ptx)

    def launch(self, grid, block, args, shared: int = 0, stream=None) -> None:
        from .launch import launch_program
        launch_program(self, grid, block, args, shared, stream)

    def __repr__(self) -> str:
        return f"<CudaProgram {self.name} ({self.kernel_name}, {self.arch})>"


def with_cubin(name: str, ptx: str, kernel_name: str, arch: str, params,
               bounds_sites: tuple | None = None, sources: tuple = ()) -> CudaProgram:
    """A program for `ptx`, with a cubin from nvJitLink when present (cached on disk); with
    foreign `sources` (lang/foreign.py) the cubin, linked with them, is required."""
    program = CudaProgram(name, ptx, kernel_name, arch, params, bounds_sites=bounds_sites)
    version = driver.nvjitlink_version()
    if version is None and not sources:
        return program
    key = foreign.cubin_key(program.ptx_hash, sources, arch, version)
    path = _entry_path(key, "cubin")
    entry = read_entry(path) if disk_enabled() else None
    if entry is not None:
        stats["cubin_hit"] += 1
        program.cubin = entry[1]
        return program
    stats["cubin_miss"] += 1
    program.cubin = foreign.link(ptx, sources, arch) if sources else driver.link_ptx(ptx, arch)
    if disk_enabled():
        write_entry(path, {"arch": arch, "nvjitlink": list(version)}, program.cubin)
    return program


def compile_program(spec, arch: str, noalias: bool = True, sources: tuple = ()) -> CudaProgram:
    """The specialization's PTX for `arch`: from the disk cache, else from the NVPTX backend.
    With `noalias`, the arrays the codegen stage found private are `noalias` (passes/alias.py)
    and the program names the launch conditions of that and its build without. `sources`:
    the foreign code it is linked with (lang/foreign.py)."""
    kernel = spec.kernel
    private = spec.codegen.kernel.attrs.get("private_arrays") if noalias else None
    options = {"fastmath": kernel.fastmath, "boundscheck": kernel.boundscheck,
               "noalias": sorted(private.arguments) if private is not None else []}
    if kernel.max_registers is not None:
        options["max_registers"] = kernel.max_registers
    # the lowering's environment switches (measured on/off): those turned off
    options.update({f"{name}_warp_sums": False for name, on in warp_sum_switches().items()
                    if not on})
    ir_text = str(spec.codegen)
    start = time.perf_counter()
    key = ptx_key(ir_text, arch, options)
    path = _entry_path(key, "ptx")
    entry = read_entry(path) if disk_enabled() else None
    if entry is not None and entry[0].get("kernel_name"):
        stats["ptx_hit"] += 1
        meta, ptx = entry[0], entry[1].decode()
    else:
        stats["ptx_miss"] += 1
        compiled = _nvptx().compile(spec.codegen, arch=arch, fastmath=kernel.fastmath,
                                    boundscheck=kernel.boundscheck,
                                    max_registers=kernel.max_registers, noalias=noalias)
        ptx = compiled.ptx
        meta = {"kernel_name": compiled.kernel_name, "arch": arch,
                "bounds_sites": [[site.array, site.loc.file, site.loc.line, site.loc.col]
                                 for site in compiled.bounds_sites]}
        if disk_enabled():
            write_entry(path, meta, ptx.encode())
    spec.timings["cuda-ptx"] = time.perf_counter() - start
    start = time.perf_counter()
    sites = tuple((array, Loc(file, line, col)) for array, file, line, col in
                  meta.get("bounds_sites", ())) if kernel.boundscheck else None
    program = with_cubin(kernel.__name__, ptx, meta["kernel_name"], arch, spec.params, sites,
                         sources)
    program.shared_carveout = getattr(spec, "shared_carveout", None)
    program.raises = tuple(raises(spec.codegen))   # what a checked launch's error names
    program.cooperative = spec.codegen.any_op(GridSync)
    if private is not None and private.arguments:
        program.private = private
        program.aliased = lambda: spec.compiled("cuda-aliased")
    spec.timings["cuda-cubin"] = time.perf_counter() - start
    return program


# the register cap of a kernel's PTX: the one directive `max_registers` changes
_MAXNREG = re.compile(r"^\.maxnreg \d+$", re.MULTILINE)


def recapped(program: CudaProgram, max_registers: int,
             sources: tuple = ()) -> CudaProgram | None:
    """`program` under another register cap, made from its PTX: the NVPTX backend writes the
    cap as the entry's one `.maxnreg` line and the rest of the PTX does not depend on it, so
    only nvJitLink (or the driver's JIT) runs again, not LLVM. Its build without `noalias`
    is recapped alike when first needed. None when the PTX holds no single `.maxnreg` line.
    `sources`: the foreign code the program is linked with (lang/foreign.py)."""
    ptx, count = _MAXNREG.subn(f".maxnreg {int(max_registers)}", program.ptx)
    if count != 1:
        return None
    out = with_cubin(program.name, ptx, program.kernel_name, program.arch, program.params,
                     program.bounds_sites, sources)
    out.shared_carveout, out.private = program.shared_carveout, program.private
    out.raises = getattr(program, "raises", ())
    out.cooperative = program.cooperative
    if program.aliased is not None:
        uncapped, made = program.aliased, []

        def aliased():
            if not made:
                base = uncapped()
                made.append(recapped(base, max_registers, sources) or base)
            return made[0]
        out.aliased = aliased
    return out


def _nvptx():
    try:
        from ...backend import nvptx
    except ImportError as error:
        if "nvptx" not in str(error):
            raise
        raise LaunchError("the CUDA backend needs zymo.backend.nvptx, which this version of "
                          "zymo does not have; launch on the CPU instead: kernel.on(\"cpu\")"
                          ) from None
    if not hasattr(nvptx, "compile"):
        raise InternalError("zymo.backend.nvptx has no compile()")
    return nvptx
