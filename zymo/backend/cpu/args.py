"""Launch arguments packed for the entry point: one `struct` call per launch.

The block of 8-byte words the entry point reads is (grid x, y, z, block x, y, z) followed by
each parameter: a scalar in one word, an array as (data pointer, shape..., strides...) with
strides counted in elements. Each parameter gets a packer, checked once per launch.
"""
from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...diagnostics import LaunchError
from ...ir.types import Array, Scalar, Type, byte_span, is_time

LAUNCH_WORDS = 7   # grid (3), block (3), the bytes of dynamic shared memory

# struct codes of the scalars, padded to one 8-byte word
_SCALAR_CODES = {"f16": "e6x", "f32": "f4x", "f64": "d", "i8": "b7x", "i16": "h6x",
                 "i32": "i4x", "i64": "q", "u8": "B7x", "u16": "H6x", "u32": "I4x",
                 "u64": "Q", "bool": "?7x", "c64": "f4xf4x", "c128": "dd"}

Packer = Callable[[Any, list, list], None]


def words_of(t: Type) -> int:
    if isinstance(t, Array):
        return 1 + 2 * t.ndim
    return 2 if t.is_complex else 1   # a complex scalar: its real part, then its imaginary


def layout(params: Sequence[tuple[str, Type]]) -> tuple[struct.Struct, list[Packer]]:
    """The struct of the whole argument block and one packer per parameter."""
    codes = ["<" + "q" * LAUNCH_WORDS]
    packers = []
    for name, t in params:
        if isinstance(t, Array):
            codes.append("Q" + "q" * (2 * t.ndim))
            packers.append(_array_packer(name, t))
        else:
            assert isinstance(t, Scalar)
            codes.append(_SCALAR_CODES[t.name])
            packers.append(_scalar_packer(name, t))
    return struct.Struct("".join(codes)), packers


def _array_packer(name: str, t: Array) -> Packer:
    dtype, ndim, contiguous = t.dtype.dtype, t.ndim, t.layout == "C"
    item = dtype.itemsize

    def pack(arg: Any, words: list, arrays: list) -> None:
        if type(arg) is not np.ndarray and not isinstance(arg, np.ndarray):
            raise LaunchError(f"argument `{name}` must be a NumPy array, not "
                              f"{type(arg).__name__}")
        if arg.dtype != dtype or arg.ndim != ndim:
            raise LaunchError(f"argument `{name}` is a {arg.ndim}-d {arg.dtype} array; the "
                              f"kernel was compiled for {t}")
        if contiguous and not arg.flags.c_contiguous:
            raise LaunchError(f"argument `{name}` is not C-contiguous; the kernel was "
                              "compiled for C layout")
        strides = arg.strides
        if any(s % item for s in strides):
            raise LaunchError(f"argument `{name}` has strides {strides} that are not "
                              f"multiples of its item size {item}")
        data = arg.ctypes.data
        words.append(data)
        words.extend(arg.shape)
        words.extend([s // item for s in strides])
        arrays.append(_span(arg, data))

    return pack


def _scalar_packer(name: str, t: Scalar) -> Packer:
    if t.is_complex:
        return _complex_packer(name, t)
    convert: Callable[[Any], Any] = float if t.is_float else (bool if t.is_bool else int)
    if is_time(t):   # its count of units (a datetime64 is no int to Python)
        convert = lambda value: int(np.asarray(value, t.dtype).view(np.int64))
    if t.is_float and t.bits < 64:   # NumPy rounds (and overflows to inf) as the kernel does
        narrow = t.dtype.type
        convert = lambda value: float(narrow(value))

    def pack(arg: Any, words: list, arrays: list) -> None:
        try:
            words.append(convert(arg))
        except (TypeError, ValueError, OverflowError) as error:
            raise LaunchError(f"argument `{name}` ({arg!r}) is not a {t}: {error}") from None

    return pack


def _complex_packer(name: str, t: Scalar) -> Packer:
    narrow = t.dtype.type

    def pack(arg: Any, words: list, arrays: list) -> None:
        try:
            value = narrow(arg)
        except (TypeError, ValueError, OverflowError) as error:
            raise LaunchError(f"argument `{name}` ({arg!r}) is not a {t}: {error}") from None
        words += [float(value.real), float(value.imag)]

    return pack


def pack_block(shape: struct.Struct, words: list, names: Sequence[str],
               types: Sequence[Type]) -> bytes:
    try:
        return shape.pack(*words)
    except (struct.error, OverflowError) as error:   # an int outside its parameter's range
        raise LaunchError(f"launch arguments do not fit the kernel's parameter types "
                          f"({', '.join(f'{n}: {t}' for n, t in zip(names, types))}): "
                          f"{error}") from None


def _span(array: np.ndarray, data: int) -> tuple[int, int]:
    if array.flags.c_contiguous:     # the common case, without a loop
        return data, data + array.nbytes
    return byte_span(data, array.shape, array.strides, array.itemsize)


def overlapping(spans: list[tuple[int, int]]) -> bool:
    """Whether two arrays' byte ranges overlap (they may share memory)."""
    ordered = sorted(span for span in spans if span[1] > span[0])
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(ordered))
