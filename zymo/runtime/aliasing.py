"""Which arrays of a derivative's launch share memory, and whether the derivative can still be
right: `zm.grad` and `zm.jvp` launches check this before choosing a variant.

A derivative reads and writes two kinds of memory: the arrays (primal values) and their shadows
(cotangents or tangents). Sharing is fine where it means the same thing for both:

- two Duplicated arguments whose arrays overlap (one array passed twice, overlapping views)
  are right when their shadows overlap *alike*: each shadow lies at one fixed distance from
  its array, the same for both, with the same strides (`zm.Duplicated(x, dx)` twice, or views
  of `x` and the same views of `dx`). Then every element has one cotangent, and the launch
  picks the variant whose shadow updates are all atomic and whose code assumes no argument
  apart (`Aliasing.shadows_shared`);
- anything else that shares memory with a shadow or a Duplicated array would be silently
  wrong, and is a `LaunchError` naming both arguments: a shadow overlapping an array (the
  derivative would write cotangents over the values it differentiates), the shadows of two
  arguments whose arrays are apart (one cotangent for two values), arrays that overlap with
  shadows that do not overlap alike, and a Const array the kernel uses overlapping a
  Duplicated array or a shadow (its reads and writes carry derivatives Const drops).

Const arrays overlapping each other are the kernel's own business: the primal launch allows
them (`overlapping` turns off `noalias` in grad.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..diagnostics import LaunchError
from ..ir.types import byte_span
from .cuda.arguments import param_of_arg
from .cuda.arrays import array_info, is_gpu_array


@dataclass(frozen=True)
class Layout:
    """Where an array's elements lie: the address of element 0, byte strides, shape."""
    origin: int
    strides: tuple
    shape: tuple
    itemsize: int

    @property
    def span(self) -> tuple:
        """[low, high) bytes covered, or an empty span for an empty array."""
        return byte_span(self.origin, self.shape, self.strides, self.itemsize)


def layout(value) -> Layout | None:
    """The layout of a NumPy or GPU array; None for scalars and unknown objects."""
    if isinstance(value, np.ndarray):
        return Layout(value.__array_interface__["data"][0], tuple(value.strides),
                      tuple(value.shape), value.itemsize)
    info = array_info(value) if is_gpu_array(value) else None
    if info is None:
        return None
    size = np.dtype(info.dtype).itemsize
    return Layout(info.data, tuple(s * size for s in info.strides), tuple(info.shape), size)


def may_share(a: Layout, b: Layout) -> bool:
    """Whether two arrays may have a byte in common. Spans that meet can still be apart when
    every element of each sits at one residue modulo a stride both share (a[::2], a[1::2])."""
    (a_low, a_high), (b_low, b_high) = a.span, b.span
    if a_low >= b_high or b_low >= a_high:
        return False
    step = 0
    for n, s in (*zip(a.shape, a.strides), *zip(b.shape, b.strides)):
        if n > 1:
            step = math.gcd(step, abs(s))
    if step == 0:           # one element each, and the spans meet
        return True
    gap = (b.origin - a.origin) % step
    return gap < a.itemsize or step - gap < b.itemsize


def overlapping(values) -> bool:
    """Whether the byte ranges of two of the array arguments among `values` meet (the same
    array twice included; interleaved views count too: a cheap, conservative first test)."""
    spans = sorted(span for span in (found.span for found in map(layout, values)
                                     if found is not None) if span[1] > span[0])
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))


def self_overlapping(value) -> bool:
    """Whether two elements of one array argument may share memory (see `folds`)."""
    found = layout(value)
    return found is not None and folds(found)


def folds(a: Layout) -> bool:
    """Whether two elements of the array may share memory (a zero stride, a view folded onto
    itself). A sufficient test: axes by increasing stride, each beyond the reach of those
    before it."""
    reach = a.itemsize
    for stride, n in sorted((abs(s), n) for n, s in zip(a.shape, a.strides) if n > 1):
        if stride < reach:
            return True
        reach += stride * (n - 1)
    return False


def translated_alike(array_a: Layout, shadow_a: Layout, array_b: Layout,
                     shadow_b: Layout) -> bool:
    """Whether both shadows lie at the same fixed distance from their arrays, with their
    arrays' strides: then shared array elements have shared shadow elements, and only those."""
    return (shadow_a.strides == array_a.strides and shadow_b.strides == array_b.strides
            and shadow_a.origin - array_a.origin == shadow_b.origin - array_b.origin)


@dataclass
class _Memory:
    index: int          # argument position
    role: str           # "array" (of a Duplicated), "shadow", "const"
    layout: Layout
    shadow_of: object = None   # for an array: its shadows' layouts (one, or W in forward mode)


@dataclass(frozen=True)
class Aliasing:
    """What the launch's arrays share that the derivative must be built for."""
    shadows_shared: bool       # some shadows overlap (alike): atomic updates, no `noalias`


def check(arguments, used: set, word: str = "shadow") -> Aliasing:
    """Check the launch's arrays (see the module doc) and say what they share. `arguments`:
    per argument, (its value, its shadows: () for a Const, W tangents in forward mode);
    `used`: the positions of the arguments whose arrays the kernel reads or writes; `word`:
    "shadow" or "tangent", for the messages."""
    memory = _memories(arguments, used)
    for array in (m for m in memory if m.role == "array"):
        for shadow in array.shadow_of:
            if folds(shadow) and not folds(array.layout):
                raise LaunchError(f"the {word} of argument {array.index} puts several "
                                  f"elements in one place (a zero or overlapping stride), "
                                  f"its array does not: one element would hold the "
                                  f"derivatives of several values. Give it a {word} array "
                                  f"of its own shape (np.zeros_like)")
    shared = False
    for k, a in enumerate(memory):
        for b in memory[k + 1:]:
            if not may_share(a.layout, b.layout):
                continue
            problem = _problem(a, b, memory, word)
            if problem:
                raise LaunchError(problem)
            shared |= a.role == b.role == "shadow"
    return Aliasing(shared)


def check_launch(kernel, arguments, word: str = "shadow") -> Aliasing:
    """`check` for a launch of `kernel`'s derivative: the arrays the kernel uses are those its
    primal specialization reads or writes."""
    primal = kernel.specialization(tuple(param_of_arg(value) for value, _ in arguments))
    written, read = primal.array_uses()
    return check(arguments, written | read, word)


def _memories(arguments, used: set) -> list:
    memory = []
    for index, (value, shadows) in enumerate(arguments):
        primal = layout(value)
        if primal is None:
            continue
        if not shadows:
            if index in used:
                memory.append(_Memory(index, "const", primal))
            continue
        shadow_layouts = [s for s in (layout(v) for v in shadows) if s is not None]
        memory.append(_Memory(index, "array", primal, shadow_layouts))
        memory += [_Memory(index, "shadow", s) for s in shadow_layouts]
    return memory


def _problem(a: _Memory, b: _Memory, memory: list, word: str) -> str:
    """Why sharing memory between `a` and `b` would make the derivative wrong ("" if not)."""
    roles = {a.role, b.role}
    names = f"arguments {a.index} and {b.index}" if a.index != b.index \
        else f"argument {a.index}"
    if roles == {"const"}:
        return ""
    if "const" in roles:
        const, other = (a, b) if a.role == "const" else (b, a)
        what = "array" if other.role == "array" else word
        return (f"argument {const.index} (Const) shares memory with the {what} of argument "
                f"{other.index}: the Const's reads and writes would carry derivatives that "
                f"Const drops. Pass it as zm.Duplicated with the same {word} (the same views "
                f"of it), or pass a copy")
    if roles == {"array", "shadow"}:
        array, shadow = (a, b) if a.role == "array" else (b, a)
        return (f"the {word} of argument {shadow.index} shares memory with the array of "
                f"argument {array.index}: the derivative would write its {word}s over the "
                f"values it differentiates. Give each zm.Duplicated a {word} array of its own")
    if a.role == "array":      # both arrays: their shadows must overlap alike
        if _alike(a, b):
            return ""
        return (f"{names} share array memory, but their {word}s do not share it alike: "
                f"pass the same {word} array for the same array (zm.Duplicated(x, dx) twice, "
                f"or the same views of x and of dx)")
    # both shadows: right only as the shadows of arrays that overlap alike
    arrays = {m.index: m for m in memory if m.role == "array"}
    first, second = arrays[a.index], arrays[b.index]
    if a.index != b.index and may_share(first.layout, second.layout) and _alike(first, second):
        return ""
    if a.index == b.index:
        return (f"the {word}s of argument {a.index} share memory: give each direction a "
                f"{word} array of its own")
    return (f"the {word}s of {names} share memory, but their arrays do not: one "
            f"element would hold the derivatives of two values. Give each its own {word}")


def _alike(a: _Memory, b: _Memory) -> bool:
    """Every shadow of `a` and every shadow of `b` translated alike (one each in reverse
    mode; forward mode with W tangents needs direction k's to match, so equal counts)."""
    if len(a.shadow_of) != len(b.shadow_of):
        return False
    return all(translated_alike(a.layout, sa, b.layout, sb)
               for sa, sb in zip(a.shadow_of, b.shadow_of))
