"""The kernel ABI (what a compiled kernel's `.entry` takes) and the argument facts behind it.

`KERNEL_ABI_DOC` is the contract with the CUDA runtime, which packs launch arguments to it;
`entry_params` lists the parameters of one kernel in that order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir.module import Module
from ...ir.operation import Operation
from ...ir.traits import CallsFunction, Convergent, Pure, ReadsMemory, WritesMemory
from ...ir.types import Array, FunctionType, Scalar
from ...ir.values import BlockArgument
from ...ops.views import array_origin
from ..llvm.context import ERROR_WORDS

KERNEL_ABI_DOC = f"""\
The `.entry` of a kernel compiled by `zymo.backend.nvptx.compile` takes, for each kernel
argument in order:

- an array (`Array(dtype, ndim, ...)`): 1 + 2*ndim parameters:
    data     `.u64`, a global (device) pointer to element [0, ..., 0];
    extents  ndim x `.u64` (int64), the shape;
    strides  ndim x `.u64` (int64), in elements (bytes / itemsize), always passed, even
             for C-layout arrays (whose kernels compute strides from the shape and ignore
             these; pass the true strides anyway);
- a scalar: 1 parameter holding the value, of the scalar's own width (f32 `.f32`,
  i64 `.u64`, ...); a bool is one byte (`.u8`, 0 or 1); a complex scalar is 2 parameters,
  its real then its imaginary part (`.f32` for complex64, `.f64` for complex128).

Kernels compiled with `boundscheck=True` take one more parameter, last: `.u64`, a global
pointer to {ERROR_WORDS} int64 words, zeroed before the launch. A failed bounds check stores,
once per launch: word 0 = 1 (error code), 1 = the site (an index into `PTXKernel.bounds_sites`),
2 = ndim, 3..6 = the indices, 7..10 = the extents.

Array arguments that the codegen stage found private to a thread (the kernel's
`private_arrays` attribute, zymo/passes/alias.py) are declared `noalias` unless compiled with
`noalias=False`: a launch of that build must pass them apart from every other array argument
(where either is written) and meet `PrivateArrays.single`; the runtime checks both and
otherwise launches the build without. Private arrays the kernel never writes are read through
the non-coherent cache (`ld.global.nc`), so they must not change during the launch. Dynamic
shared memory (`zm.shared.array(0, dtype)`) is the launch's dynamic shared bytes; every such
array starts at its beginning.

`PTXKernel.params` lists the parameters in this order, with the NumPy dtype each is packed
as (pointers as uint64); `PTXKernel.kernel_name` is the `.entry` symbol to look up.
"""

POINTER = np.dtype(np.uint64)
EXTENT = np.dtype(np.int64)


@dataclass(frozen=True)
class PTXParam:
    """One parameter of a kernel's `.entry`."""

    name: str           # "x", "x.shape[0]", "x.strides[1]", "n", "errbuf"
    role: str           # "data", "shape", "strides", "value" or "errbuf"
    arg: int            # index of the kernel argument it comes from (-1: the error buffer)
    axis: int | None    # the axis of a shape or stride
    dtype: np.dtype     # how the runtime packs it


def entry_params(func: Operation, boundscheck: bool) -> list[PTXParam]:
    """The `.entry` parameters of kernel `func`, in order (see KERNEL_ABI_DOC)."""
    ftype: FunctionType = func.attrs["function_type"]
    names = tuple(func.attrs.get("arg_names") or ())
    params: list[PTXParam] = []
    for index, t in enumerate(ftype.inputs):
        name = names[index] if index < len(names) else f"arg{index}"
        if isinstance(t, Array):
            params.append(PTXParam(name, "data", index, None, POINTER))
            for role in ("shape", "strides"):
                params += [PTXParam(f"{name}.{role}[{axis}]", role, index, axis, EXTENT)
                           for axis in range(t.ndim)]
        elif isinstance(t, Scalar) and t.is_complex:
            params += [PTXParam(f"{name}.{part}", "value", index, None, t.part.dtype)
                       for part in ("real", "imag")]
        else:
            assert isinstance(t, Scalar)
            dtype = np.dtype(np.uint8) if t.is_bool else t.dtype
            params.append(PTXParam(name, "value", index, None, dtype))
    if boundscheck:
        params.append(PTXParam("errbuf", "errbuf", -1, None, POINTER))
    return params


def read_only_arrays(func: Operation) -> set[int]:
    """Indices of the array arguments of `func` that it provably never writes: every use is
    a load or a shape read. An array that flows anywhere else (a call, a region's result)
    counts as written."""
    args = [a for a in func.regions[0].block.args if isinstance(a.type, Array)]
    unsafe: set[BlockArgument] = set()
    for op in func.walk():
        reads_only = (op.has_trait(ReadsMemory) or op.has_trait(Pure)) \
            and not op.has_trait(WritesMemory)
        if not reads_only:   # through a view (`a.real`, `a.reshape(...)`) too
            origins = (array_origin(v) for v in op.operands)
            unsafe.update(v for v in origins if isinstance(v, BlockArgument) and v in args)
    return {a.index for a in args if a not in unsafe}


def convergent_functions(module: Module) -> set[str]:
    """Functions that run a barrier or a warp op, directly or through the functions they call
    (LLVM must not make their calls depend on more or fewer threads)."""
    callees = {name: {op.attrs["callee"] for op in func.walk() if op.has_trait(CallsFunction)}
               for name, func in module.functions.items()}
    convergent = {name for name, func in module.functions.items()
                  if any(op.has_trait(Convergent) for op in func.walk())}
    changed = True
    while changed:
        grown = {name for name, called in callees.items() if called & convergent}
        changed = not grown <= convergent
        convergent |= grown
    return convergent
