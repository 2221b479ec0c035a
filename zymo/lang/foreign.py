"""Foreign device functions: what a kernel may call that is written in CUDA C or PTX, and the
sources the program is linked with. Declarations only; the backends compile and link them
(CUDA: NVRTC and nvJitLink; the CPU and the interpreter: the host's C++ compiler)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..ir.types import Array, Scalar

# what each file suffix holds, as nvJitLink names its inputs
KINDS = {".cu": "cu", ".ptx": "ptx", ".cubin": "cubin", ".fatbin": "fatbin", ".o": "object",
         ".a": "library", ".ltoir": "ltoir"}


@dataclass(frozen=True)
class LinkSource:
    """One input of the link: CUDA C (`kind` "cu", compiled by NVRTC for the GPU and by the
    host's C++ compiler for the CPU), PTX, or a compiled GPU image. `data` is its content, read
    when it is declared, so the content (not the path) keys the compile caches; `name` is the
    file's path or a name for text given in memory."""

    name: str
    kind: str
    data: bytes = field(repr=False)
    digest: str = ""
    includes: tuple[str, ...] = ()   # folders searched for #include <...>

    def __post_init__(self):
        if not self.digest:
            object.__setattr__(self, "digest", hashlib.sha256(self.data).hexdigest()[:16])

    @property
    def text(self) -> str:
        return self.data.decode()

    @property
    def folder(self) -> str | None:
        """The folder of a file source (its `#include "..."` are found there), else None."""
        path = Path(self.name)
        return str(path.parent) if path.is_absolute() else None

    def __str__(self) -> str:
        return f"{Path(self.name).name}@{self.digest}" + \
            (f"[-I{':'.join(self.includes)}]" if self.includes else "")

    @classmethod
    def from_path(cls, path) -> "LinkSource":
        path = Path(path)
        kind = KINDS.get(path.suffix)
        if kind is None:
            raise ValueError(f"cannot link {path}: zymo links {', '.join(sorted(KINDS))} files")
        try:
            data = path.read_bytes()
        except OSError as error:
            raise FileNotFoundError(f"cannot link {path}: {error.strerror}") from None
        return cls(str(path.resolve()), kind, data)

    @classmethod
    def from_text(cls, text: str, kind: str = "cu", name: str = "") -> "LinkSource":
        data = text.encode()
        return cls(name or f"<{kind} source {hashlib.sha256(data).hexdigest()[:8]}>", kind, data)


@dataclass(frozen=True)
class ForeignFunction:
    """A device function named `symbol` that the link provides, called with numba's ABI
    (`int symbol(result* out, args...)`, the int being 0: numba reads other values as a raised
    exception; zymo ignores it) or, with `abi` "c", as `result symbol(args...)`. `inputs` are
    scalars, or arrays of one dimension standing for `CPointer(dtype)` (the kernel passes an
    array, `ffi.from_buffer(array)` or a pointer parameter); `output` is a scalar or None
    (void)."""

    symbol: str
    inputs: tuple[Scalar | Array, ...]
    output: Scalar | None
    link: tuple[LinkSource, ...] = ()
    abi: str = "numba"    # or "c": `output symbol(args...)`, a plain C call

    def __str__(self) -> str:
        ins = ", ".join(f"{t.dtype}*" if isinstance(t, Array) else str(t) for t in self.inputs)
        # the link is part of the name: the IR text keys the compile caches
        link = f" link {', '.join(map(str, self.link))}" if self.link else ""
        abi = " abi(c)" if self.abi == "c" else ""
        return f"{self.output or 'void'} {self.symbol}({ins}){abi}{link}"


def link_sources(link, includes: tuple[str, ...] = ()) -> tuple[LinkSource, ...]:
    """`link=` as numba takes it (a path, a CUDA C source object, or a list/tuple/set of them)
    as LinkSources, in a stable order without repeats; CUDA C searches `includes` too."""
    if link is None:
        return ()
    items = list(link) if isinstance(link, (list, tuple, set, frozenset)) else [link]
    sources = []
    for item in items:
        if isinstance(item, LinkSource):
            source = item
        elif hasattr(item, "zymo_link_source"):
            source = item.zymo_link_source
        elif isinstance(item, (str, Path)):
            source = LinkSource.from_path(item)
        else:
            raise TypeError(f"cannot link {item!r}: give paths of .cu/.ptx/.cubin/... files or "
                            f"cuda.CUSource(...) objects")
        if includes and source.kind == "cu":
            source = replace(source, includes=tuple(includes))
        if source not in sources:
            sources.append(source)
    if isinstance(link, (set, frozenset)):
        sources.sort(key=lambda s: (s.name, s.digest))
    return tuple(sources)
