"""libdevice: NVIDIA's math library as LLVM bitcode, found on disk and linked only when used.

Looked for, in order: `$ZYMO_LIBDEVICE` (the file); `cuda.pathfinder` when installed (the CUDA
wheels `nvidia-cuda-nvcc-cu12` / `nvidia-nvvm` that `zymo[cuda]` / `zymo[cuda13]` install,
conda, `$CUDA_HOME` / `$CUDA_PATH`); the same wheel folders on `sys.path`; `$CUDA_HOME`,
`$CUDA_PATH`, `/usr/local/cuda` and `/usr/local/cuda-*` (newest first), each at
`nvvm/libdevice/libdevice.10.bc`.

Parsing the whole library costs ~80 ms, so each set of requested functions is cut out of it
once per process (requested functions kept, the rest internalized and removed) and kept as
small bitcode; a compilation parses and links only that (~3 ms). The whole library is parsed
again only for functions never requested before. After linking, every libdevice function is
internal, so O3 inlines it and drops what is unused.
"""
from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import llvmlite.binding as llvm

from . import machine

FILENAME = "libdevice.10.bc"
RELATIVE = Path("nvvm", "libdevice", FILENAME)
WHEEL_DIRS = (Path("nvidia", "cuda_nvcc"), Path("nvidia", "cu13"), Path("nvidia", "cu12"))
PREFIX = "__nv_"
INSTALL_HINT = ("`pip install \"zymo[cuda]\"` (CUDA 12 wheels, libdevice from "
                "nvidia-cuda-nvcc-cu12; `zymo[cuda13]` for CUDA 13, libdevice from nvidia-nvvm), "
                "or set CUDA_HOME to a CUDA toolkit, or ZYMO_LIBDEVICE to the path of "
                "libdevice.10.bc")


@dataclass
class _Cuts:
    """Cut-out libraries: by requested names, and the union of every request so far (cut
    once from the whole library; later requests within it are cut from this small one)."""

    by_names: dict[frozenset[str], bytes] = field(default_factory=dict)
    union: frozenset[str] = frozenset()
    union_bitcode: bytes = b""


_path: Path | None = None
_cuts = _Cuts()


class LibdeviceNotFoundError(RuntimeError):
    """No libdevice on this machine; the message says where zymo looked and what to install."""


def candidates() -> list[Path]:
    """Where libdevice may be, in the order searched (pathfinder's answer not included)."""
    places: list[Path] = []
    if os.environ.get("ZYMO_LIBDEVICE"):
        places.append(Path(os.environ["ZYMO_LIBDEVICE"]))
    for entry in sys.path:
        places += [Path(entry) / wheel / RELATIVE for wheel in WHEEL_DIRS]
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            places.append(Path(os.environ[variable]) / RELATIVE)
    places.append(Path("/usr/local/cuda") / RELATIVE)
    places += [Path(root) / RELATIVE
               for root in sorted(glob.glob("/usr/local/cuda-*"), key=_version, reverse=True)]
    return places


def find() -> Path:
    """The path of libdevice.10.bc, or LibdeviceNotFoundError."""
    global _path
    if _path is not None:
        return _path
    explicit = os.environ.get("ZYMO_LIBDEVICE")
    found = Path(explicit) if explicit and Path(explicit).is_file() else _from_pathfinder()
    if found is None:
        found = next((p for p in candidates() if p.is_file()), None)
    if found is None:
        looked = "\n  ".join(str(p) for p in candidates())
        raise LibdeviceNotFoundError(f"libdevice ({FILENAME}) was not found; the kernel "
                                     f"calls math functions that need it. Looked in:\n  "
                                     f"{looked}\nTo fix: {INSTALL_HINT}.")
    _path = found
    return found


def requested(module: llvm.ModuleRef) -> frozenset[str]:
    """The libdevice functions `module` declares (calls without a definition)."""
    return frozenset(f.name for f in module.functions
                     if f.is_declaration and f.name.startswith(PREFIX))


def link(module: llvm.ModuleRef, target_machine: llvm.TargetMachine) -> bool:
    """Link the libdevice functions `module` calls, internalized; False when it calls none."""
    names = requested(module)
    if not names:
        return False
    library = llvm.parse_bitcode(_cut_out(names, target_machine))
    library.triple, library.data_layout = module.triple, module.data_layout
    module.link_in(library)
    for fn in module.functions:
        if fn.name in names and not fn.is_declaration:
            fn.linkage = "internal"
    return True


def _cut_out(names: frozenset[str], target_machine: llvm.TargetMachine) -> bytes:
    """Bitcode holding the functions `names` and whatever they use, nothing else."""
    with machine.lock:
        cut = _cuts.by_names.get(names)
        if cut is None:
            if not names <= _cuts.union:   # parse the whole library only when the union grows
                union = _cuts.union | names
                _cuts.union_bitcode = _reduce(find().read_bytes(), union, target_machine)
                _cuts.union = union
            cut = _reduce(_cuts.union_bitcode, names, target_machine)
            _cuts.by_names[names] = cut
        return cut


def _reduce(bitcode: bytes, names: frozenset[str], target_machine: llvm.TargetMachine) -> bytes:
    """`bitcode` less every function that `names` do not need."""
    library = llvm.parse_bitcode(bitcode)
    missing = names - {f.name for f in library.functions if not f.is_declaration}
    if missing:
        raise LibdeviceNotFoundError(f"{find()} has no {', '.join(sorted(missing))}")
    for fn in library.functions:
        if not fn.is_declaration:
            fn.linkage = "external" if fn.name in names else "internal"
    machine.run_passes(library, target_machine, ("global_dead_code_eliminate",))
    return library.as_bitcode()


def _from_pathfinder() -> Path | None:
    try:
        from cuda import pathfinder
    except ImportError:
        return None
    try:
        return Path(pathfinder.find_bitcode_lib("device"))
    except Exception:   # not found, or an older pathfinder without bitcode libraries
        return None


def _version(root: str) -> tuple[int, ...]:
    digits = root.rsplit("-", 1)[-1].split(".")
    return tuple(int(d) for d in digits if d.isdigit())
