"""How an index varies across threads, to pick the cheapest correct adjoint of a read.

Each integer value gets a form:
- `Uniform`: the same in every thread at a given moment (arguments, extents, block indices,
  constants, `range` variables of loops with uniform bounds, elements of constant arrays at
  uniform indices, and pure ops over these); `invariant` when fixed for the whole kernel
  (defined outside every loop);
- `ThreadAffine(axis, base, offset, parts)`: the thread index along `axis` (`base` "tid") or the
  global thread index (`base` "gid": blockIdx * blockDim + threadIdx) plus uniform terms
  (`parts`), which at any one moment maps distinct threads to distinct indices;
- `Wrapped(inner, modulus)`: a thread-affine index `% n` with `n` fixed for the kernel, the
  periodic neighbour of stencils and lattice-Boltzmann streaming: still one index per thread as
  long as the launch has at most `n` threads along the axis (checked at launch);
- `Varying`: anything else.

`IndexForms.ownership` decides whether each thread reaches elements of its own through an index
tuple, so that the shadow is updated with plain adds: the non-uniform components must be
thread-affine (or wrapped) on distinct axes, and any of their terms that change over time must
be functions of the tuple's uniform components (then two moments that reach the same element
have the same terms, hence the same thread).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.operation import Operation
from ..ir.traits import (Aliases, ConstantLike, Conversion, CountedLoop, Pure, ReadsMemory,
                         ThreadVarying, WritesMemory)
from ..ir.types import Array, Scalar
from ..ir.values import BlockArgument, Value
from ..ops.registry import HOST, INDEX_FORM


@dataclass(frozen=True)
class Uniform:
    invariant: bool          # fixed for the whole kernel (defined outside every loop)
    term: tuple = ()         # how to compare it as an offset: ("const", v) or ("value", id)


@dataclass(frozen=True)
class ThreadAffine:
    axis: str
    base: str                # "tid" or "gid"
    offset: tuple            # sorted terms of the uniform offset (to compare forms)
    parts: tuple = ()        # (sign, value, invariant) of each uniform term of the offset


@dataclass(frozen=True)
class Wrapped:
    inner: ThreadAffine
    modulus: Value           # kernel-invariant


class Varying:
    pass


VARYING = Varying()


@dataclass(frozen=True)
class Wrap:
    """A launch condition of a plain update through `(thread index + terms) % modulus`: the
    threads along `axis` number at most `modulus`, and the index before `%` stays within
    +-(2**31 - 1) (the terms: constants of magnitude at most `bound` plus `multiples` times
    the modulus). The modulus is an argument, an argument's extent or a constant."""
    axis: str
    modulus: tuple           # how the launch finds it: ("arg", i), ("dim", i, axis), ("const", n)
    bound: int
    multiples: int


@dataclass(frozen=True)
class LaunchAssumptions:
    """What a derivative's plain shadow updates assume of the launch: one thread (grid and
    block) along each axis in `single` (axes an owned index does not use: threads along them
    would share elements), each `Wrap`'s bound, arrays that fit a block-private copy,
    (`covers`) a thread for every element of a gathered array along each axis, and (`blocks`)
    the threads a block needs to fill a shared tile again (`zymo.ad.refill`), and (`most`) at
    most n threads in a block along an axis (`zymo.ad.transpose`'s scratch slots)."""
    single: frozenset = frozenset()
    wraps: frozenset = frozenset()
    budgets: frozenset = frozenset()   # (array shapes as sources, capacity): elements that fit
    covers: frozenset = frozenset()    # (axis, extent source): at least that many threads
    blocks: frozenset = frozenset()    # (axis, n): at least n threads in a block along axis
    most: frozenset = frozenset()      # (axis, n): at most n threads in a block along axis

    @staticmethod
    def owning(owned: "Ownership") -> "LaunchAssumptions":
        return LaunchAssumptions(frozenset("xyz") - owned.axes, frozenset(owned.wraps))

    def combine(self, other: "LaunchAssumptions") -> "LaunchAssumptions":
        return LaunchAssumptions(self.single | other.single, self.wraps | other.wraps,
                                 self.budgets | other.budgets, self.covers | other.covers,
                                 self.blocks | other.blocks, self.most | other.most)

    def hold(self, grid, block, modulus) -> bool:
        """`grid`, `block`: 3-tuples; `modulus(source)`: a Wrap's modulus at this launch."""
        for k, axis in enumerate("xyz"):
            if axis in self.single and (grid[k] != 1 or block[k] != 1):
                return False
        for wrap in self.wraps:
            k = "xyz".index(wrap.axis)
            threads, n = grid[k] * block[k], modulus(wrap.modulus)
            if n is None or not 1 <= threads <= n \
                    or threads + wrap.bound + wrap.multiples * n > 2**31 - 1:
                return False
        for axis, threads in self.blocks:
            if block["xyz".index(axis)] < threads:
                return False
        for axis, threads in self.most:
            if block["xyz".index(axis)] > threads:
                return False
        for axis, source in self.covers:
            k = "xyz".index(axis)
            extent = modulus(source)
            if extent is None or grid[k] * block[k] < extent:
                return False
        for shapes, capacity in self.budgets:
            total = 0
            for shape in shapes:
                extents = [modulus(source) for source in shape]
                if None in extents:
                    return False
                size = 1
                for extent in extents:
                    size *= extent
                total += size
            if total > capacity:
                return False
        return True


@dataclass(frozen=True)
class Ownership:
    axes: frozenset          # thread axes the index uses (others need one thread at launch)
    wraps: tuple             # Wrap conditions checked at launch


class IndexForms:
    def __init__(self, func):
        self.func = func
        self.forms: dict[Value, object] = {}
        for arg in func.args:
            self.forms[arg] = Uniform(True, ("value", id(arg)))
        self._block(func.body.block)

    def form(self, value: Value):
        return self.forms.get(value, VARYING)

    def thread_axes(self, space: str) -> frozenset:
        """The thread axes the kernel's indices into `space` memory vary along (threadIdx
        for shared memory, the global thread id otherwise): a launch is expected to have
        several threads along each."""
        base = "tid" if space == "shared" else "gid"
        found = set()
        for form in self.forms.values():
            inner = unwrapped(form)
            if isinstance(inner, ThreadAffine) and inner.base == base:
                found.add(inner.axis)
        return frozenset(found)

    def ownership(self, indices: list[Value], space: str) -> Ownership | None:
        """Whether distinct threads reach distinct elements through `indices` at every moment
        (see the module docstring), and under which launch conditions; None if not provable."""
        if space == "local":
            return Ownership(frozenset(), ())
        base = "tid" if space == "shared" else "gid"
        forms = [self.form(i) for i in indices]
        selectors = {i for i, f in zip(indices, forms) if isinstance(f, Uniform)}
        axes, wraps = [], []
        for form in forms:
            if isinstance(form, Uniform):
                continue
            inner = unwrapped(form)
            if not isinstance(inner, ThreadAffine) or inner.base != base:
                return None
            if not all(invariant or self._function_of(value, selectors)
                       for _, value, invariant in inner.parts):
                return None
            if isinstance(form, Wrapped):
                wrap = self._wrap(form)
                if wrap is None:
                    return None
                wraps.append(wrap)
            axes.append(inner.axis)
        if not axes or len(set(axes)) != len(axes):
            return None
        return Ownership(frozenset(axes), tuple(wraps))

    def _wrap(self, form: Wrapped) -> Wrap | None:
        modulus = self._on_host(form.modulus)
        bound, multiples = 0, 0
        for _, value, _ in form.inner.parts:
            magnitude = _magnitude(value)
            if value is form.modulus:
                multiples += 1
            elif magnitude is not None:
                bound += magnitude
            else:
                return None
        return None if modulus is None else Wrap(form.inner.axis, modulus, bound, multiples)

    def _on_host(self, value: Value) -> tuple | None:
        """How the launch reads a kernel-invariant value: an argument, an argument's extent or
        a constant (what `Wrap.modulus` may name); not through a cast, which may narrow it."""
        source = host_expression(value, self.func.body.block)
        if source is None or source[0] == "apply" or not isinstance(value, BlockArgument) \
                and value.owner.has_trait(Conversion):
            return None
        return source

    def _function_of(self, value: Value, roots: set) -> bool:
        """Whether `value` is computed from `roots` and kernel-invariant values alone."""
        form = self.form(value)
        if value in roots or isinstance(form, Uniform) and form.invariant:
            return True
        if isinstance(value, BlockArgument):
            return False
        op = value.owner
        if op.has_trait(ThreadVarying) or not (op.has_trait(Pure) or _constant_element(op)):
            return False
        return all(self._function_of(v, roots) for v in op.operands)

    def _block(self, block) -> None:
        for op in block.ops:
            if op.regions:
                self._structured(op)
            elif op.results and all(isinstance(r.type, Scalar) for r in op.results):
                self.forms[op.results[0]] = self._form_of(op)

    def _structured(self, op: Operation) -> None:
        if op.has_trait(CountedLoop):
            bounds = [self.form(v) for v in (op.lower, op.upper, op.step)]
            iv = op.body.block.args[0]
            self.forms[iv] = (Uniform(False, ("value", id(iv)))
                              if all(isinstance(f, Uniform) for f in bounds) else VARYING)
        for region in op.regions:
            self._block(region.block)

    def _form_of(self, op: Operation):
        operands = [self.form(v) for v in op.operands]
        rule = INDEX_FORM.find(op)
        form = None if rule is None else rule(self, op, *operands)
        if form is not None:
            return form
        result = op.results[0]
        if op.has_trait(ConstantLike):
            return Uniform(True, ("const", op.value))
        if _constant_element(op) and all(isinstance(f, Uniform) for f in operands[1:]):
            return Uniform(all(f.invariant for f in operands[1:]), ("value", id(result)))
        if op.has_trait(ThreadVarying) or not op.has_trait(Pure):
            return VARYING
        if all(isinstance(f, Uniform) for f in operands):
            return Uniform(all(f.invariant for f in operands), ("value", id(result)))
        return VARYING

    # ---- the vocabulary of the ops' index-form rules (`index_form_rule` in `ops/`) ----------
    @staticmethod
    def thread_index(axis: str) -> "ThreadAffine":
        return ThreadAffine(axis, "tid", ())

    @staticmethod
    def register(op: Operation, name: str) -> "Register":
        """A uniform special register (blockIdx: "ctaid", blockDim: "ntid") along `op.axis`."""
        return Register(True, ("value", id(op.results[0])), name, op.axis)

    @staticmethod
    def product(op: Operation, a, b):
        """blockIdx * blockDim along one axis: the start of a block's global ids."""
        if isinstance(a, Register) and isinstance(b, Register) and a.axis == b.axis \
                and {a.name, b.name} == {"ctaid", "ntid"}:
            return BlockBase(a.axis)
        return None

    @staticmethod
    def sum(op: Operation, a, b):
        y = op.operands[1]
        if isinstance(b, ThreadAffine):
            a, b, y = b, a, op.operands[0]
        if isinstance(a, ThreadAffine) and isinstance(b, BlockBase):
            if a.base == "tid" and b.axis == a.axis:   # threadIdx + blockIdx * blockDim
                return ThreadAffine(a.axis, "gid", a.offset, a.parts)
        elif isinstance(a, ThreadAffine) and isinstance(b, Uniform):
            return _shifted(a, b, y, +1)
        return None

    @staticmethod
    def difference(op: Operation, a, b):
        if isinstance(a, ThreadAffine) and isinstance(b, Uniform) and not isinstance(b, BlockBase):
            return _shifted(a, b, op.operands[1], -1)
        return None

    @staticmethod
    def conversion(op: Operation, a):
        if isinstance(a, (ThreadAffine, Wrapped)) \
                and op.results[0].type.bits >= op.operands[0].type.bits:
            return a   # widening keeps distinct indices distinct
        return None

    @staticmethod
    def remainder(op: Operation, a, b):
        if isinstance(a, ThreadAffine) and isinstance(b, Uniform) and b.invariant:
            return Wrapped(a, op.operands[1])
        return None


@dataclass(frozen=True)
class BlockBase(Uniform):
    """blockIdx * blockDim along one axis: uniform, and the start of a block's global ids."""

    def __init__(self, axis: str):
        object.__setattr__(self, "invariant", True)
        object.__setattr__(self, "term", ("block_base", axis))
        object.__setattr__(self, "axis", axis)


@dataclass(frozen=True)
class Register(Uniform):
    """A uniform special register along one axis (what `BlockBase` is made of)."""
    name: str = ""
    axis: str = ""


def _terms(*groups) -> tuple:
    return tuple(sorted((t for g in groups for t in g), key=repr))


def _shifted(a: ThreadAffine, b: Uniform, value: Value, sign: int) -> ThreadAffine:
    term = b.term if sign > 0 else ("neg",) + b.term
    return ThreadAffine(a.axis, a.base, _terms(a.offset, (term,)),
                        a.parts + ((sign, value, b.invariant),))


def _constant_element(op: Operation) -> bool:
    """A read of a compile-time constant array (`zm.const.array_like`) itself, not of a
    view of one (whose op holds no data)."""
    if not op.has_trait(ReadsMemory) or op.has_trait(WritesMemory) or not op.operands:
        return False
    array = op.operands[0]
    return isinstance(array.type, Array) and array.type.space == "const" \
        and not isinstance(array, BlockArgument) and not array.owner.has_trait(Aliases)


def host_expression(value: Value, params) -> tuple | None:
    """How a launch computes `value` from the kernel's arguments (`params`: the function's
    entry block), by the ops' host rules (`host_rule` in `ops/`); None if it cannot."""
    if isinstance(value, BlockArgument):
        return ("arg", value.index) if value.block is params else None
    op = value.owner
    rule = HOST.find(op)
    if rule is None:
        return None
    operands = [host_expression(v, params) for v in op.operands]
    return None if None in operands else rule(op, *operands)


def _magnitude(value: Value) -> int | None:
    """The largest |value| can be, when known at compile time."""
    if isinstance(value, BlockArgument):
        loop = value.block.parent_op
        if value.index != 0 or loop is None or not loop.has_trait(CountedLoop):
            return None
        bounds = [_magnitude(v) for v in (loop.lower, loop.upper)]
        return None if None in bounds else max(bounds)   # a range variable lies between
    op = value.owner
    if op.has_trait(ConstantLike) and isinstance(op.value, int):
        return abs(op.value)
    if _constant_element(op) and op.operands[0].owner.data.dtype.kind in "iu":
        data = op.operands[0].owner.data
        return int(max(abs(int(data.max())), abs(int(data.min())))) if data.size else 0
    if op.has_trait(Conversion) and isinstance(op.operands[0].type, Scalar) \
            and op.operands[0].type.is_int:
        return _magnitude(op.operands[0])
    return None


def unwrapped(form):
    """The thread-affine index under a `% modulus`, else the form itself."""
    return form.inner if isinstance(form, Wrapped) else form


def uniform(forms: list) -> bool:
    return all(isinstance(f, Uniform) for f in forms)


def same_along_x(forms: list) -> bool:
    """Whether threads that differ only in threadIdx.x index alike: a warp's lanes run along
    x first, so such an address is shared by runs of neighbouring lanes."""
    return all(isinstance(f, Uniform) or isinstance(unwrapped(f), ThreadAffine)
               and unwrapped(f).axis != "x" for f in forms)
