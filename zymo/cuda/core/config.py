"""numba's configuration flags, as attributes of this module (`config.FLAG = value`, or
`override_config("FLAG", value)` in tests).

Flags zymo acts on:
- `CUDA_WARN_ON_IMPLICIT_COPY` and `DISABLE_PERFORMANCE_WARNINGS`: the warning a GPU launch
  gives when it copies NumPy arguments to the device and back (zymo's runtime switch
  `zymo.runtime.cuda.launch.WARN_ON_HOST_COPY` follows them).
- `CUDA_LOW_OCCUPANCY_WARNINGS` (and `DISABLE_PERFORMANCE_WARNINGS`): `kernel[grid, block]`
  and target-"cuda" ufunc launches warn of grids of fewer than 128 blocks, as numba does (on
  the CPU too: the warning is about the code, which would leave a GPU idle). The host-copy
  warning is given on the CPU too, for NumPy and pinned arrays a GPU launch would copy.
- `CUDA_ARRAY_INTERFACE_SYNC`: consuming another library's array whose interface names a
  stream (as_cuda_array, a cuda.jit launch, a ufunc call) synchronizes that stream first.
- `CUDA_DEFAULT_PTX_CC`: the compute capability `cuda.compile_ptx` targets when given none.
- `CUDA_DEBUGINFO_DEFAULT` / `DEBUGINFO_DEFAULT`: `cuda.jit`'s `debug` when not given (in
  zymo `debug` turns bounds checks on).
- `OPT` (an `_OptLevel`: 0, 1, 2, 3 or "max", from NUMBA_OPT): `cuda.jit`'s `opt` when not
  given is `OPT != 0`; `debug` with `opt` gives numba's NumbaInvalidConfigWarning
  (`resolve_debug_opt`).
- `ENABLE_CUDASIM` is False: zymo has no simulator (without a GPU kernels run compiled on the
  CPU).

The others are recorded only, so that code setting them runs: zymo has no NRT, no dump
switches (`zymo ir` prints each stage's IR instead); zymo optimises at one level whatever
`OPT` says.
"""
from __future__ import annotations

import os
import sys
import types as _types
import warnings


def _env_flag(name: str, default: int) -> int:
    value = os.environ.get("NUMBA_" + name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable NUMBA_{name}={value!r}: write 0 or 1") from None


class _OptLevel(int):
    """numba's optimisation level: an int (0 to 3) that remembers whether it was given as
    "max" (which counts as 3)."""

    def __new__(cls, value):
        level = super().__new__(cls, 3 if value == "max" else int(value))
        level._raw = "max" if value == "max" else int(level)
        return level

    @property
    def is_opt_max(self) -> bool:
        return self._raw == "max"

    def __repr__(self) -> str:
        return f"_OptLevel({self._raw!r})"


def _opt_from_env() -> _OptLevel:
    value = os.environ.get("NUMBA_OPT", "")
    if value == "":
        return _OptLevel(3)
    if value not in ("0", "1", "2", "3", "max"):
        raise ValueError(f"environment variable NUMBA_OPT={value!r}: write 0, 1, 2, 3 or max")
    return _OptLevel(value)


ENABLE_CUDASIM = False
CUDA_LOW_OCCUPANCY_WARNINGS = _env_flag("CUDA_LOW_OCCUPANCY_WARNINGS", 1)
CUDA_DEFAULT_PTX_CC = (9, 0)
CUDA_DEBUGINFO_DEFAULT = _env_flag("CUDA_DEBUGINFO", 0)
DEBUGINFO_DEFAULT = _env_flag("DEBUGINFO", 0)
CUDA_ENABLE_NRT = False
CUDA_ARRAY_INTERFACE_SYNC = True
CUDA_PER_THREAD_DEFAULT_STREAM = False
CUDA_NVRTC_EXTRA_SEARCH_PATHS = ""
CUDA_DEBUG_POLY = False
CUDA_DEBUG_POLY_USE_TYPED_CONST = False
CUDA_USE_NVIDIA_BINDING = True
CUDA_ENABLE_PYNVJITLINK = False
ALWAYS_WARN_UNINIT_VAR = False
OPT = _opt_from_env()
BOUNDSCHECK = None
HTML = None
DUMP_BYTECODE = DUMP_CFG = DUMP_IR = DUMP_LLVM = DUMP_ASSEMBLY = DUMP_OPTIMIZED = False
DEVELOPER_MODE = False
FULL_TRACEBACKS = False
SHOW_HELP = False

# the flags whose value lives in zymo's runtime switch (read back from it, written through)
_IMPLICIT_COPY = [bool(_env_flag("CUDA_WARN_ON_IMPLICIT_COPY", 1))]
_NO_PERF = [bool(_env_flag("DISABLE_PERFORMANCE_WARNINGS", 0))]


def _sync_host_copy_switch() -> None:
    from ...runtime.cuda import launch
    launch.WARN_ON_HOST_COPY[0] = _IMPLICIT_COPY[0] and not _NO_PERF[0]


class _Config(_types.ModuleType):
    @property
    def CUDA_WARN_ON_IMPLICIT_COPY(self) -> bool:   # noqa: N802
        return _IMPLICIT_COPY[0]

    @CUDA_WARN_ON_IMPLICIT_COPY.setter
    def CUDA_WARN_ON_IMPLICIT_COPY(self, value) -> None:   # noqa: N802
        _IMPLICIT_COPY[0] = bool(value)
        _sync_host_copy_switch()

    @property
    def DISABLE_PERFORMANCE_WARNINGS(self) -> bool:   # noqa: N802
        return _NO_PERF[0]

    @DISABLE_PERFORMANCE_WARNINGS.setter
    def DISABLE_PERFORMANCE_WARNINGS(self, value) -> None:   # noqa: N802
        _NO_PERF[0] = bool(value)
        _sync_host_copy_switch()


def performance_warnings(flag: str) -> bool:
    """Whether the performance warning `flag` names is on (and performance warnings are)."""
    module = sys.modules[__name__]
    return bool(getattr(module, flag)) and not _NO_PERF[0]


def resolve_debug_opt(debug, opt, lineinfo=False) -> tuple[bool, bool]:
    """`cuda.jit`'s debug and opt (None: the configured defaults), warning as numba does of
    the combinations CUDA does not support (both kept: zymo's `debug` is bounds checks)."""
    from .errors import NumbaInvalidConfigWarning
    module = sys.modules[__name__]
    debug = bool(module.CUDA_DEBUGINFO_DEFAULT if debug is None else debug)
    opt = bool(module.OPT != 0 if opt is None else opt)
    if debug and opt:
        warnings.warn("debug=True with opt=True is not supported by CUDA (debug information "
                      "for optimised code may be wrong); pass debug=False or opt=False",
                      NumbaInvalidConfigWarning, stacklevel=3)
    if debug and lineinfo:
        warnings.warn("debug and lineinfo are mutually exclusive: debug gives line information "
                      "too; pass one of them", NumbaInvalidConfigWarning, stacklevel=3)
    return debug, opt


sys.modules[__name__].__class__ = _Config
_sync_host_copy_switch()
