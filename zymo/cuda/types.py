"""numba's type objects (`float32`, `int64[:, ::1]`, `void(float32[:], int32)`), as values that
stand for zymo's IR types: kernels read them through `zymo_type` (the frontend maps any object
carrying it onto the IR type), signatures turn into the `Param`s a kernel is specialized on.

numba's layouts: `[:]` is any strides ("A"), `[::1]` on the last axis is C-contiguous ("C");
`[::1, :]` (Fortran order) has no zymo layout of its own and is passed with its strides ("A").
"""
from __future__ import annotations

import numpy as np

from ..ir import types as T
from ..lang.params import Param


class Type:
    """Base of numba-style types. Called with types it makes a signature (`float32(int32)`),
    called with a value it converts it like the NumPy scalar type does."""

    def __init__(self, name: str = ""):   # numba's extension types name themselves
        self.name = name

    def __str__(self) -> str:
        return getattr(self, "name", "") or type(self).__name__

    __repr__ = __str__

    def __call__(self, *args):
        if all(isinstance(a, Type) for a in args):
            return Signature(self, tuple(args))
        if len(args) == 1 and isinstance(self, Number):
            return self.dtype.type(args[0])
        raise TypeError(f"{self}(...) takes types (a signature) or one value (a conversion)")


class Number(Type):
    """A scalar type: `name` as numba spells it, `dtype` its NumPy dtype."""

    def __init__(self, name: str, dtype):
        self.name, self.dtype = name, np.dtype(dtype)

    @property
    def bitwidth(self) -> int:
        return self.dtype.itemsize * 8

    @property
    def zymo_type(self) -> T.Scalar:
        try:
            return T.scalar_of_dtype(self.dtype)
        except KeyError:
            raise TypeError(f"{self.name} is not a type zymo compiles yet") from None

    def __getitem__(self, dims) -> "ArrayType":
        dims = dims if isinstance(dims, tuple) else (dims,)
        if not dims or not all(isinstance(d, slice) and d.start is None and d.stop is None
                               and d.step in (None, 1) for d in dims):
            raise TypeError(f"{self.name}[...]: write each axis as ':' (or '::1' for the "
                            f"contiguous one), e.g. {self.name}[:, ::1]")
        steps = [d.step for d in dims]
        layout = "C" if steps[-1] == 1 and all(s is None for s in steps[:-1]) else \
            "F" if steps[0] == 1 and len(steps) > 1 and all(s is None for s in steps[1:]) \
            else "A"
        return ArrayType(self, len(dims), layout)

    def __eq__(self, other) -> bool:
        return isinstance(other, Number) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("Number", self.dtype))

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


class Boolean(Number):
    pass


class Integer(Number):
    @property
    def signed(self) -> bool:
        return self.dtype.kind == "i"


class Float(Number):
    pass


class Complex(Number):
    @property
    def underlying_float(self) -> "Float":
        """The type of the real and imaginary parts."""
        return from_dtype(np.dtype(f"f{self.dtype.itemsize // 2}"))


class NPDatetime(Number):
    """numba's `NPDatetime(unit)`: datetime64[unit] (an int64 count of units since 1970)."""

    def __init__(self, unit: str):
        super().__init__(f"datetime64[{unit}]", f"M8[{unit}]")
        self.unit = unit


class NPTimedelta(Number):
    """numba's `NPTimedelta(unit)`: timedelta64[unit] (an int64 count of units)."""

    def __init__(self, unit: str):
        super().__init__(f"timedelta64[{unit}]", f"m8[{unit}]")
        self.unit = unit


class NoneType(Type):
    """numba's `void`: the return type of kernels."""

    name = "void"

    def __eq__(self, other) -> bool:
        return isinstance(other, NoneType)

    def __hash__(self) -> int:
        return hash("void")

    def __str__(self) -> str:
        return "none"

    __repr__ = __str__


class Array(Type):
    """`dtype[:, ::1]` or `Array(dtype, ndim, layout)`: an array argument of `ndim` axes and
    layout "C", "F" or "A"."""

    def __init__(self, dtype: Number, ndim: int, layout: str = "A"):
        if layout not in ("C", "F", "A"):
            raise TypeError(f"Array layout is 'C', 'F' or 'A', not {layout!r}")
        self.dtype, self.ndim, self.layout = dtype, int(ndim), layout

    @property
    def zymo_type(self) -> T.Array:
        # zymo's arrays are C-ordered or strided: Fortran order is passed with its strides
        return T.Array(self.dtype.zymo_type, self.ndim, "global",
                       "C" if self.layout == "C" else "A")

    def __eq__(self, other) -> bool:
        return isinstance(other, Array) and \
            (other.dtype, other.ndim, other.layout) == (self.dtype, self.ndim, self.layout)

    def __hash__(self) -> int:
        return hash((self.dtype, self.ndim, self.layout))

    def __str__(self) -> str:
        return f"array({self.dtype}, {self.ndim}d, {self.layout})"

    __repr__ = __str__


class Record(Type):
    """numba's type of a NumPy record (structured) dtype. Kernels take record arrays typed from
    the argument at launch; as an element type in a signature it is an error saying so."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)

    __getitem__ = Number.__getitem__

    @property
    def name(self) -> str:
        return f"Record({self.dtype})"

    @property
    def zymo_type(self):
        raise TypeError(f"{self.name}: record arrays are typed from the array at launch; leave "
                        f"the signature out of cuda.jit for a kernel that takes one")

    def __eq__(self, other) -> bool:
        # NumPy's == ignores `align=True`; numba's record types do not (nor its alignment)
        return isinstance(other, Record) and other.dtype == self.dtype and \
            other.dtype.isalignedstruct == self.dtype.isalignedstruct

    def __hash__(self) -> int:
        return hash(("Record", self.dtype, self.dtype.isalignedstruct))

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


ArrayType = Array


class Signature:
    """`return_type(arg types...)`."""

    def __init__(self, return_type: Type, args: tuple):
        self.return_type, self.args = return_type, tuple(args)

    def __eq__(self, other) -> bool:
        return isinstance(other, Signature) and \
            (other.return_type, other.args) == (self.return_type, self.args)

    def __hash__(self) -> int:
        return hash((self.return_type, self.args))

    def __str__(self) -> str:
        return f"{self.return_type}({', '.join(map(str, self.args))})"

    __repr__ = __str__


class CPointer(Type):
    """numba's `CPointer(dtype)`: a raw address of `dtype` elements, indexed `p[i]` in a
    kernel (a one-dimensional array of unknown extent) and passed to foreign functions."""

    def __init__(self, dtype: Number):
        self.dtype = dtype

    @property
    def zymo_type(self) -> T.Array:
        return T.Array(self.dtype.zymo_type, 1, "global", "C")

    def __eq__(self, other) -> bool:
        return isinstance(other, CPointer) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("CPointer", self.dtype))

    def __str__(self) -> str:
        return f"CPointer({self.dtype})"

    __repr__ = __str__


class BaseTuple(Type):
    """numba's tuple types, as signatures name results of several values."""

    def __init__(self, types):
        self.types = tuple(types)
        self.name = f"{type(self).__name__}({', '.join(map(str, self.types))})"

    def __iter__(self):
        return iter(self.types)

    def __len__(self) -> int:
        return len(self.types)

    def __getitem__(self, index):
        return self.types[index]

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.types == self.types

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.types))


class Tuple(BaseTuple):
    """A tuple of values of different types (`Tuple((float64, int32))`)."""


class UniTuple(BaseTuple):
    """`count` values of one type (`UniTuple(float64, 2)`)."""

    def __init__(self, dtype, count: int):
        super().__init__((dtype,) * count)
        self.dtype, self.count = dtype, count


void = none = NoneType()
boolean = bool_ = b1 = Boolean("bool", np.bool_)
int8 = i1 = Integer("int8", np.int8)
int16 = i2 = Integer("int16", np.int16)
int32 = i4 = Integer("int32", np.int32)
int64 = i8 = intp = int_ = Integer("int64", np.int64)
uint8 = u1 = byte = Integer("uint8", np.uint8)
uint16 = u2 = Integer("uint16", np.uint16)
uint32 = u4 = Integer("uint32", np.uint32)
uint64 = u8 = uintp = Integer("uint64", np.uint64)
float16 = f2 = half = Float("float16", np.float16)
float32 = f4 = single = Float("float32", np.float32)
float64 = f8 = double = float_ = Float("float64", np.float64)
complex64 = c8 = Complex("complex64", np.complex64)
complex128 = c16 = Complex("complex128", np.complex128)
# C's names, as numba has them (LP64: long is 64 bits)
char, uchar, short, ushort = int8, uint8, int16, uint16
intc, uintc, long_, ulong, longlong, ulonglong = int32, uint32, int64, uint64, int64, uint64
signed_domain = frozenset((int8, int16, int32, int64))
unsigned_domain = frozenset((uint8, uint16, uint32, uint64))

NAMES = {name: value for name, value in dict(globals()).items()
         if isinstance(value, (Number, NoneType)) and not name.startswith("_")}
NUMBERS = (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32,
           float64, complex64, complex128)
_BY_DTYPE = {t.dtype: t for t in NUMBERS}


def from_dtype(dtype) -> Number:
    """The numba type of a NumPy dtype (numba's `numba.from_dtype`)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "mM":
        unit, count = np.datetime_data(dtype)
        if count == 1:    # numba types one unit: "generic" for unit-less, no "2D"
            return (NPTimedelta if dtype.kind == "m" else NPDatetime)(unit)
    try:
        return _BY_DTYPE[dtype]
    except KeyError:
        raise TypeError(f"no numba type for the NumPy dtype {np.dtype(dtype)}") from None


def of_param(param: Param) -> Type:
    """The numba type of a kernel parameter (Python numbers arrive as int64 / float64)."""
    kind = param.type
    if param.kind == "record" and kind is not None and kind.dtype is not None:
        record = Record(kind.dtype)
        return record if kind.scalar else ArrayType(record, kind.ndim, "A")
    if param.kind == "pointer":
        return CPointer(from_dtype(kind.dtype.dtype))
    if isinstance(kind, T.Array):
        return ArrayType(from_dtype(kind.dtype.dtype), kind.ndim, kind.layout)
    return from_dtype(kind.dtype)


def param_of(kind) -> Param:
    """The `Param` a numba type in a signature stands for."""
    if isinstance(kind, CPointer):
        return Param("pointer", kind.zymo_type)
    if isinstance(kind, Record):                   # one record, passed by reference
        return record_param(kind.dtype, 1, scalar=True)
    if isinstance(kind, Array) and isinstance(kind.dtype, Record):
        return record_param(kind.dtype.dtype, kind.ndim, scalar=False)
    if isinstance(kind, Type) and not isinstance(kind, NoneType):
        zymo = kind.zymo_type
        return Param("array" if isinstance(zymo, T.Array) else "value", zymo)
    if isinstance(kind, str):
        return param_of(parse(kind))
    if isinstance(kind, (T.Scalar, T.Array)):   # zymo's own types work as well
        return Param("array" if isinstance(kind, T.Array) else "value", kind)
    if isinstance(kind, type) and issubclass(kind, np.generic):
        return param_of(from_dtype(kind))
    raise TypeError(f"{kind!r} is not a type of a kernel argument: write numba types such as "
                    f"float32, int64 or float32[:, ::1]")


def record_param(dtype: np.dtype, ndim: int, scalar: bool) -> Param:
    """The Param of record arrays of `dtype` declared in a signature: one strided array per
    field, as a launch passes them. As numba, a declared record type must be aligned (its
    fields at offsets, and records at strides, that are multiples of their size): typed from
    the array at launch instead, unaligned fields are loaded piecewise."""
    from ..lang.params import Records
    fields = []
    for name in dtype.names:
        field, offset = dtype.fields[name][:2]
        base = field.base if field.subdtype is not None else field
        if base.names:
            raise TypeError(f"field '{name}' of {dtype} is itself a record; kernels read "
                            f"fields of numbers and arrays of numbers")
        element = from_dtype(base)
        natural = T.scalar_of_dtype(base).nbytes if not base.kind == "c" else \
            base.itemsize // 2
        if offset % natural or dtype.itemsize % natural:
            raise TypeError(f"type {element} is not aligned: field '{name}' of {dtype} is at "
                            f"offset {offset} (records of {dtype.itemsize} bytes)\nhint: make "
                            f"the dtype with np.dtype(..., align=True), or leave the signature "
                            f"out of cuda.jit (launches type records from the array and load "
                            f"unaligned fields piecewise)")
        fields.append(Param("array", T.Array(element.zymo_type, ndim + len(field.shape),
                                             "global", "A", align=_field_align(base, offset,
                                                                              dtype.itemsize))))
    subshapes = tuple(dtype.fields[name][0].shape for name in dtype.names)
    return Param("record", Records(ndim, scalar, subshapes, dtype), tuple(fields), dtype.names)


def _field_align(base: np.dtype, offset: int, itemsize: int) -> int:
    """The `align` of a field's array (0: its elements' own size), as a launch computes it
    from the field's address and strides (allocations are taken to be 256-byte aligned)."""
    natural = align = base.itemsize
    for step in (offset, itemsize):
        while align > 1 and step % align:
            align //= 2
    return 0 if align == natural else align


def parse(text: str):
    """A signature or a type written as text: `"void(float32[:], int32)"`, `"float32[:],
    int32"` (argument types only), `"f4[::1]"`."""
    namespace = {"__builtins__": {}, **NAMES, "CPointer": CPointer, "Array": Array}
    try:
        value = eval(text, namespace)   # noqa: S307 - names only numba's types
    except Exception as error:
        raise TypeError(f"cannot read the signature {text!r} ({error}): write e.g. "
                        f"\"void(float32[:], int32)\"") from None
    return value


def signature_of(sig) -> Signature:
    """A Signature from what `cuda.jit` takes: a Signature, its text, or a tuple of argument
    types (the return type is void)."""
    if isinstance(sig, str):
        sig = parse(sig)
    if isinstance(sig, Type):           # one argument type, written without a tuple
        sig = (sig,)
    if isinstance(sig, (tuple, list)):
        return Signature(void, tuple(parse(a) if isinstance(a, str) else a for a in sig))
    if isinstance(sig, Signature):
        return sig
    raise TypeError(f"{sig!r} is not a signature: write e.g. \"void(float32[:], int32)\" or "
                    f"void(float32[:], int32)")
