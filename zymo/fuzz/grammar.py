"""The fuzzer's program grammar: typed expression nodes, statement kinds and the program record.

A kernel is a sequence of statements over per-thread scalar variables. Every variable is
declared (with its type) at the top of the kernel, so any statement can be deleted without
leaving a use undefined: that is what lets the shrinker remove statements freely. Each
statement kind renders itself, lists its sub-blocks (`blocks`) and its expressions (`exprs`),
and offers simpler replacements of itself (`unwrap`), which the shrinker tries in turn.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

FLOATS = ("f32", "f64")
INTS = ("i32", "i64", "u32", "u64", "i16", "i8", "u8")
SCALARS = FLOATS + INTS + ("bool",)
DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64,
          "u32": np.uint32, "u64": np.uint64, "i16": np.int16, "i8": np.int8, "u8": np.uint8,
          "bool": np.bool_}
BITS = {"i32": 32, "i64": 64, "u32": 32, "u64": 64, "i16": 16, "i8": 8, "u8": 8}


def zm_type(ty: str) -> str:
    """The kernel-language spelling of a scalar type."""
    return "zm.bool_" if ty == "bool" else f"zm.{ty}"


# ---- expressions ------------------------------------------------------------------------------
@dataclass
class Expr:
    """`template` with `{0}`, `{1}`... standing for the rendered `args`, of scalar type `ty`.

    `det`: every backend computes exactly the same bits (loads, casts, min/max, comparisons:
    no rounding that may differ, no fused multiply-add); only such floats may decide a branch
    or be cast to an integer. `bound`: an upper bound of the value's magnitude (floats).
    `transcendental`: the tree holds a math-library call (looser comparison bound)."""

    template: str
    args: list = field(default_factory=list)
    ty: str = "i32"
    det: bool = True
    bound: float = 1.0
    transcendental: bool = False

    def render(self) -> str:
        return self.template.format(*(a.render() for a in self.args))


def lit(value, ty: str) -> Expr:
    """A literal, always spelled with its type so it needs nothing around it to be typed."""
    if ty == "bool":
        return Expr("True" if value else "False", ty="bool")
    if ty in FLOATS:
        return Expr(f"{zm_type(ty)}({float(value)!r})", ty=ty, bound=abs(float(value)))
    return Expr(f"{zm_type(ty)}({int(value)})", ty=ty, bound=abs(int(value)))


def var(name: str, ty: str, det: bool = True, bound: float = 4.0) -> Expr:
    return Expr(name, ty=ty, det=det, bound=bound)


# ---- statements -------------------------------------------------------------------------------
INDENT = "    "


class Stmt:
    """A statement kind. `collective`: it holds a barrier or a warp operation, so every thread
    of the block (or warp) must reach it together."""

    collective = False

    def render(self, depth: int) -> list[str]:
        raise NotImplementedError

    def blocks(self) -> list[list]:
        return []

    def exprs(self) -> list[tuple[object, str]]:
        """(holder, attribute) pairs naming each expression slot, for the shrinker."""
        return []

    def unwrap(self) -> list[list]:
        """Statement lists that may stand in for this statement, simplest first."""
        return []

    def features(self) -> set[str]:
        return set()


def render_block(block: list, depth: int) -> list[str]:
    lines = [line for stmt in block for line in stmt.render(depth)]
    return lines or [INDENT * depth + "pass"]


@dataclass
class Assign(Stmt):
    name: str
    value: Expr

    def render(self, depth):
        return [f"{INDENT * depth}{self.name} = {self.value.render()}"]

    def exprs(self):
        return [(self, "value")]


@dataclass
class Store(Stmt):
    """`array[index] = value`: an output element this thread owns, or a local array's slot."""
    array: str
    index: str
    value: Expr
    feature: str = "store"

    def render(self, depth):
        return [f"{INDENT * depth}{self.array}[{self.index}] = {self.value.render()}"]

    def exprs(self):
        return [(self, "value")]

    def features(self):
        return {self.feature}


@dataclass
class If(Stmt):
    cond: Expr
    then: list
    orelse: list = field(default_factory=list)

    def render(self, depth):
        lines = [f"{INDENT * depth}if {self.cond.render()}:"] + render_block(self.then, depth + 1)
        if self.orelse:
            lines += [f"{INDENT * depth}else:"] + render_block(self.orelse, depth + 1)
        return lines

    def blocks(self):
        return [self.then, self.orelse]

    def exprs(self):
        return [(self, "cond")]

    def unwrap(self):
        return [self.then, self.orelse] if self.orelse else [self.then]

    def features(self):
        return {"if"}


@dataclass
class For(Stmt):
    """`for name in range(bounds):`; `bounds` is rendered text (constants or a small,
    non-negative integer expression)."""
    name: str
    bounds: str
    body: list

    def render(self, depth):
        return [f"{INDENT * depth}for {self.name} in range({self.bounds}):"] + \
            render_block(self.body, depth + 1)

    def blocks(self):
        return [self.body]

    def unwrap(self):
        # the loop variable is only defined inside the loop: give it a value for the body
        return [] if _leaves_loop(self.body) else [[Assign(self.name, lit(0, "i32"))] + self.body]

    def features(self):
        return {"for"}


@dataclass
class While(Stmt):
    """A counting `while` loop; the counter moves first, so `continue` cannot skip it."""
    name: str
    limit: int
    body: list

    def render(self, depth):
        pad = INDENT * depth
        return [f"{pad}{self.name} = 0", f"{pad}while {self.name} < {self.limit}:",
                f"{pad}{INDENT}{self.name} += 1"] + render_block(self.body, depth + 1)

    def blocks(self):
        return [self.body]

    def unwrap(self):
        return [] if _leaves_loop(self.body) else [[Assign(self.name, lit(1, "i32"))] + self.body]

    def features(self):
        return {"while"}


@dataclass
class Jump(Stmt):
    """`break`, `continue` or `return`."""
    word: str

    def render(self, depth):
        return [f"{INDENT * depth}{self.word}"]

    def features(self):
        return {"early-return" if self.word == "return" else self.word}


def _leaves_loop(block: list) -> bool:
    """Whether `block` holds a `break` or `continue` of the loop around it (not of a loop
    inside it): such a loop's body cannot stand in for the loop."""
    for stmt in block:
        if isinstance(stmt, Jump) and stmt.word in ("break", "continue"):
            return True
        if not isinstance(stmt, (For, While)) and any(_leaves_loop(b) for b in stmt.blocks()):
            return True
    return False


@dataclass
class Raw(Stmt):
    """A fixed snippet with expression holes (`{0}`...), for the collective and memory
    patterns whose shape must not change (a barrier is never shrunk away on its own)."""
    lines: list
    args: list
    feature: str
    collective: bool = False

    def render(self, depth):
        text = [a.render() for a in self.args]
        return [INDENT * depth + line.format(*text) for line in self.lines]

    def exprs(self):
        return [(self.args, k) for k in range(len(self.args))]

    def features(self):
        return {self.feature}


# ---- the program --------------------------------------------------------------------------------
@dataclass
class ArraySpec:
    """A kernel argument array. `role`: "in" (read anywhere), "own" (read only at the
    thread's own index, before any write to it), "out" (written only at the own index),
    "scratch" (own writes, reads of the block's elements after a barrier), "slots" (written at
    an atomically claimed slot: compared as a multiset), "counter", "acc" (atomic
    accumulators). `view`: how the argument is cut from its base array (`base` names another
    spec's array when the two overlap). `rows`: when not 0, the kernel reshapes the argument to
    (rows, length // rows) at its top and reaches it only through that view."""
    name: str
    dtype: str
    length: int
    role: str
    base: str | None = None
    start: int = 0
    step: int = 1
    base_length: int = 0
    rows: int = 0

    def at(self, index: str) -> tuple[str, str]:
        """(array, subscript) naming element `index` (text) as the kernel reaches it."""
        if not self.rows:
            return self.name, index
        cols = self.length // self.rows
        return f"{self.name}_m", f"({index}) // {cols}, ({index}) % {cols}"


@dataclass
class Func:
    """A `@zm.func` device function: parameters and a body that ends in `return`."""
    name: str
    params: list
    ret: str
    body: list

    def render(self) -> list[str]:
        lines = ["@zm.func", f"def {self.name}({', '.join(p for p, _ in self.params)}):"]
        return lines + render_block(self.body, 1)


@dataclass
class Program:
    """One generated kernel and its launch. `decls` declare every variable; `body` is the
    statement list; `arrays` the array arguments (in order), `scalars` the scalar ones as
    (name, type, value)."""
    seed: int
    blocks: int
    threads: int
    decls: list
    body: list
    arrays: list
    scalars: list
    funcs: list = field(default_factory=list)
    shared: list = field(default_factory=list)     # (name, type): one slot per thread
    locals_: list = field(default_factory=list)    # (name, type, length)
    grad: bool = False
    transcendental: bool = False
    fixed_params: list | None = None    # a regression file's record names its parameters
    # 0: a 1-D block of `threads`; else a block of `width` x `rows` x `depth` threads
    # (`rows = threads // (width * depth)`), numbered `t = tx + width * (ty + rows * tz)` (how
    # the hardware forms warps), with `tiles`: shared (name, type) arrays of one element per
    # thread, indexed [ty, tx] or, with depth 2, [tz, ty, tx]
    width: int = 0
    depth: int = 1
    tiles: list = field(default_factory=list)

    @property
    def size(self) -> int:
        return self.blocks * self.threads

    @property
    def rows(self) -> int:
        return self.threads // (self.width * self.depth)

    @property
    def block(self):
        """The launch's block shape."""
        if not self.width:
            return self.threads
        return (self.width, self.rows) + ((self.depth,) if self.depth > 1 else ())

    def tile_shape(self) -> tuple:
        return ((self.depth,) if self.depth > 1 else ()) + (self.rows, self.width)

    def copy(self) -> "Program":
        return copy.deepcopy(self)

    def walk(self):
        """Every statement, depth first."""
        stack = [list(self.body)]
        while stack:
            for stmt in stack.pop():
                yield stmt
                stack.extend(stmt.blocks())

    def features(self) -> set[str]:
        found = set()
        for stmt in self.walk():
            found |= stmt.features()
        text = self.kernel_source()
        for word, feature in (("math.", "math"), ("zm.fma", "math"), ("zm.popc", "bits"),
                              ("zm.clz", "bits"), ("zm.brev", "bits"), ("zm.ffs", "bits")):
            if word in text:
                found.add(feature)
        if self.funcs:
            found.add("device-func")
        if self.blocks > 1:
            found.add("multi-block")
        if self.width:
            found.add("block-3d" if self.depth > 1 else "block-2d")
        for spec in self.arrays:
            if spec.step != 1:
                found.add("strided-view")
            if spec.base is not None:
                found.add("overlap-" + ("inplace" if spec.role == "out" else "reads"))
            if spec.rows:
                found.add("reshape")
        found |= {f"type-{ty}" for _, ty, _ in self.decls}
        return found

    def params(self) -> list[str]:
        """The arguments the kernel names (unused ones are dropped, so a shrunk kernel
        shows only what it needs)."""
        if self.fixed_params is not None:
            return list(self.fixed_params)
        text = "\n".join(self._body_lines())
        names = [spec.name for spec in self.arrays] + [name for name, _, _ in self.scalars]
        return [name for name in names if _mentions(text, name)]

    def _body_lines(self) -> list[str]:
        pad = INDENT
        if self.width:
            lines = [f"{pad}tx = zm.threadIdx.x", f"{pad}ty = zm.threadIdx.y",
                     f"{pad}tz = zm.threadIdx.z",
                     f"{pad}t = tx + {self.width} * (ty + {self.rows} * tz)",
                     f"{pad}b = zm.blockIdx.x", f"{pad}g = b * {self.threads} + t"]
        else:
            lines = [f"{pad}g = zm.grid(1)", f"{pad}t = zm.threadIdx.x", f"{pad}b = zm.blockIdx.x"]
        lines.append(f"{pad}lane = zm.laneid")
        for spec in self.arrays:
            if spec.rows:
                lines.append(f"{pad}{spec.name}_m = {spec.name}.reshape(({spec.rows}, "
                             f"{spec.length // spec.rows}))")
        for name, ty in self.shared:
            lines.append(f"{pad}{name} = zm.shared.array({self.threads}, {zm_type(ty)})")
        for name, ty in self.tiles:
            shape = ", ".join(map(str, self.tile_shape()))
            lines.append(f"{pad}{name} = zm.shared.array(({shape}), {zm_type(ty)})")
        for name, ty, length in self.locals_:
            lines.append(f"{pad}{name} = zm.local.array({length}, {zm_type(ty)})")
            lines.append(f"{pad}for q_ in range({length}):")
            lines.append(f"{pad}{INDENT}{name}[q_] = {lit(0, ty).render()}")
        for name, ty, init in self.decls:
            lines.append(f"{pad}{name} = {zm_type(ty)}({init.render()})")
        return lines + render_block(self.body, 1)

    def kernel_source(self) -> str:
        lines = []
        for func in self.funcs:
            lines += func.render() + [""]
        lines += ["@zm.kernel", f"def kern({', '.join(self.params())}):"]
        return "\n".join(lines + self._body_lines()) + "\n"

    def module_source(self) -> str:
        return "import math\n\nimport zymo as zm\n\n\n" + self.kernel_source()


def _mentions(text: str, name: str) -> bool:
    import re
    return re.search(rf"\b{re.escape(name)}\b", text) is not None
