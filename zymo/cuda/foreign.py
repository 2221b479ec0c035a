"""numba's foreign device functions: `cuda.declare_device(name, sig, link=...)` and
`cuda.CUSource(code)`. The kernel calls them with numba's ABI; the link is compiled by NVRTC
and linked by nvJitLink on the GPU, and compiled by the host's C++ compiler on the CPU
(zymo/lang/foreign.py, zymo/backend/host_c.py)."""
from __future__ import annotations

from ..ir import types as T
from ..lang.foreign import ForeignFunction, LinkSource, link_sources
from . import types as nt
from .core import config


class CUSource:
    """CUDA C source text to link, given in memory (numba's `cuda.CUSource`)."""

    def __init__(self, data: str | bytes):
        self.data = data.encode() if isinstance(data, str) else bytes(data)
        self.zymo_link_source = LinkSource.from_text(self.data.decode(), "cu")

    def __repr__(self) -> str:
        return f"CUSource({self.zymo_link_source})"


def include_paths() -> tuple[str, ...]:
    """numba's `config.CUDA_NVRTC_EXTRA_SEARCH_PATHS` (colon-separated) as folders."""
    text = getattr(config, "CUDA_NVRTC_EXTRA_SEARCH_PATHS", "") or ""
    return tuple(p for p in text.split(":") if p)


class ForeignDeclaration:
    """What `declare_device` returns: callable from kernels, with numba's `.name` and `.sig`."""

    def __init__(self, name: str, sig: nt.Signature, link=None, abi: str = "numba"):
        self.name, self.sig = name, sig
        self.link = link_sources(link, include_paths())
        self.zymo_foreign = ForeignFunction(name, tuple(_pointer_or_scalar(a) for a in sig.args),
                                            _result(sig.return_type), self.link, abi)

    def __call__(self, *args):
        raise TypeError(f"{self.name} is a device function: call it from a kernel")

    def __repr__(self) -> str:
        return f"<declared device function {self.zymo_foreign}>"


def declare_device(name: str, sig, link=None, use_cooperative: bool = False, abi="numba"):
    """Declare foreign device function `name` of signature `sig` (a numba signature with a
    return type, or its text), found in `link` (.cu/.ptx/... paths or CUSource objects) or in
    the kernel's own `link=`; `abi` "numba" (`int name(result*, args...)`) or "c"
    (`result name(args...)`)."""
    if abi not in ("numba", "c"):
        raise ValueError(f"abi must be \"numba\" or \"c\", not {abi!r}")
    if isinstance(sig, str):
        sig = nt.parse(sig)
    if not isinstance(sig, nt.Signature):
        raise TypeError(f"Return type must be provided for device declarations: write e.g. "
                        f"\"int32(float32, float32)\", not {sig!r}")
    return ForeignDeclaration(name, sig, link, abi)


def _pointer_or_scalar(kind):
    """A pointer parameter (numba's CPointer(dtype), or an array type, passed as its data
    pointer) as a 1-d array type; a number as its scalar type."""
    dtype = getattr(kind, "dtype", None)
    if isinstance(kind, (nt.CPointer, nt.Array)):
        return T.Array(nt.param_of(dtype).type, 1, "global", "A")
    if isinstance(kind, nt.Type) and not isinstance(kind, nt.NoneType):
        return kind.zymo_type
    raise TypeError(f"{kind!r} is not a parameter type of a foreign device function: write "
                    f"numbers (int32, float64, ...) or pointers (CPointer(float32))")


def _result(kind):
    if isinstance(kind, nt.NoneType):
        return None
    zymo = kind.zymo_type
    if not isinstance(zymo, T.Scalar):
        raise TypeError(f"a foreign device function returns a number or void, not {kind}")
    return zymo
