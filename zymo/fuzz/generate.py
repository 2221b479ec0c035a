"""Random race-free kernels, built from `grammar`'s statement kinds.

Race freedom is by construction: a thread writes only its own element of an output
(`out[g]`), its own shared slot (`sh[t]`), its own local array, or memory claimed by an
atomic; it reads other threads' elements only across a barrier that separates the write
from the read (and a second barrier before the slot is written again). Warp operations and
barriers are emitted only where every thread of the warp or block arrives together: at the
top level, in loops with constant trip counts and no early exits, and under conditions that
are uniform over the block. Early `return` comes after the last collective statement.

Blocks are 1-D, or 2-D for a third of the seeds and 3-D (two layers) for a third of those
(`t = tx + width * (ty + rows * tz)`, the hardware's numbering, so warps span rows when rows
are short), where shared tiles are read at other rows (layers) and rotating columns: the CPU
backend runs such a block as nested loops, which LLVM's loop vectorizer once miscompiled
where a 1-D program never showed it.

Floats stay bounded (every variable's magnitude below `VBOUND`; larger expressions are
squashed through a bounded function), so a rounding difference stays a rounding difference
and the comparison bound in `run` means something. Only floats every backend computes to the
same bits (`Expr.det`) decide branches or become integers: a one-ulp difference must not flip
control flow. For derivatives (`grad=True`) the float type is f64, the math is smooth at every
input (no abs, min, max, floor, casts to integer, float comparisons) and branches test
integers and thread indices only.
"""
from __future__ import annotations

import random

import numpy as np

from .grammar import (BITS, FLOATS, INDENT, INTS, ArraySpec, Assign, Expr, For, Func, If, Jump,
                      Program, Raw, Store, While, lit, var, zm_type)

VBOUND = 4.0       # every float variable's magnitude stays below this
SQUASH_ABOVE = 16.0

# (template, bound of the result given the operand's bound, smooth) for float unary math
_UNARY = [
    ("math.sin({0})", lambda b: 1.0, True),
    ("math.cos({0})", lambda b: 1.0, True),
    ("math.tanh({0})", lambda b: 1.0, True),
    ("math.atan({0})", lambda b: 1.6, True),
    ("math.sqrt(1.0 + {0} * {0})", lambda b: 1.0 + b, True),
    ("math.log(1.0 + {0} * {0})", lambda b: 2.0 * np.log1p(b) + 1.0, True),
    ("math.exp(math.tanh({0}))", lambda b: 2.72, True),
    ("math.erf({0})", lambda b: 1.0, True),
    ("math.asinh({0})", lambda b: np.arcsinh(b) + 1.0, True),
    ("math.expm1(math.sin({0}))", lambda b: 1.72, True),
    ("math.log1p({0} * {0})", lambda b: 2.0 * np.log1p(b) + 1.0, True),
    ("math.sqrt(abs({0}))", lambda b: np.sqrt(b) + 1.0, False),
    ("math.log(1.0 + abs({0}))", lambda b: np.log1p(b) + 1.0, False),
    ("math.exp(-abs({0}))", lambda b: 1.0, False),
    ("math.cbrt({0})", lambda b: np.cbrt(b) + 1.0, False),
    ("math.acos(math.tanh({0}) * 0.5)", lambda b: 3.2, True),
]
_SQUASH_SMOOTH = ["math.tanh({0})", "math.sin({0})", "({0} / (1.0 + {0} * {0}))"]
_SQUASH = _SQUASH_SMOOTH + ["({0} / (1.0 + abs({0})))"]
_INT_BINARY = ["+", "-", "*", "//", "%", "&", "|", "^"]
_COMPARE = ["<", "<=", "==", "!=", ">", ">="]
FULL = "0xffffffff"

# Constructs that hit a zymo bug found by this fuzzer and not fixed yet, with its regression
# test; `generate(..., avoid_known=True)` (the CI batches) leaves them out so that a batch
# keeps looking for new bugs.
FENCES = ("threadfence", "threadfence_block", "threadfence_system")
KNOWN_OPEN = {
}


class Generator:
    """Builds one program from a seed. `features` switches statement kinds off (for the
    derivative sub-grammar or to steer a batch); `grad` selects the smooth sub-grammar."""

    def __init__(self, seed: int, grad: bool = False, size: int = 12,
                 allow_slot_atomics_in_grad: bool = False, avoid_known: bool = False):
        self.avoid = set(KNOWN_OPEN) if avoid_known else set()
        self.rng = random.Random(seed)
        self.seed = seed
        self.grad = grad
        self.size = size
        self.slots_in_grad = allow_slot_atomics_in_grad
        self.counter = 0
        rng = self.rng
        self.threads = rng.choice((32, 32, 64, 64, 128))
        self.blocks = rng.choice((1, 1, 2, 3))
        # a 2-D block for a third of the seeds, drawn apart so the 1-D seeds' programs stay
        # as they were: rows of 4 to 32 threads (a warp spans rows when they are short)
        shape = random.Random(seed ^ 0x2D2D)
        self.width = shape.choice((4, 8, 16, 32)) if shape.random() < 0.33 else 0
        if self.width >= self.threads:
            self.width = 0
        # and a third of those 3-D, two layers deep
        self.depth = 2 if self.width and self.threads >= 4 * self.width and \
            shape.random() < 0.33 else 1
        self.tiles: list = []
        self.float_ty = "f64" if grad else rng.choice(FLOATS)
        self.vars: dict[str, list[str]] = {}          # type -> variable names
        self.det_vars: set[str] = set()               # floats only ever assigned det values
        self.decls: list = []
        self.arrays: list[ArraySpec] = []
        self.shared: list = []
        self.locals_: list = []
        self.funcs: list[Func] = []
        self.loop_vars: list[str] = []                # in scope, innermost last
        self.uniform_loop_vars: list[str] = []
        self.transcendental = False
        self.in_func = False
        self.trips = [1]          # the most times each enclosing loop runs (atomic slots)

    def avoided(self, template: str) -> bool:
        return any(word in template for word in self.avoid)

    # ---- names and arguments ------------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def array(self, prefix: str, dtype: str, role: str, length: int | None = None,
              **view) -> ArraySpec:
        spec = ArraySpec(self.fresh(prefix), dtype, length or self.blocks * self.threads, role,
                         **view)
        self.arrays.append(spec)
        return spec

    def make_arguments(self) -> None:
        """Input arrays (with the overlap and view choices), outputs come later."""
        rng, n = self.rng, self.blocks * self.threads
        self.inputs = [self.array("x", self.float_ty, "in", n + rng.choice((0, 5)))]
        if not self.grad or rng.random() < 0.5:
            self.inputs.append(self.array("x", rng.choice(FLOATS) if not self.grad else "f64",
                                          "in"))
        self.int_inputs = [self.array("n", rng.choice(INTS), "in")]
        overlap = rng.choice(("none", "none", "same", "views", "strided", "inplace"))
        if self.grad and overlap in ("same", "views", "inplace"):
            overlap = "strided"          # aliased Duplicated arguments: a known open issue
        first = self.inputs[0]
        if overlap == "same":        # one array passed twice, both read
            spec = ArraySpec(self.fresh("x"), first.dtype, first.length, "in", base=first.name)
        elif overlap == "views":     # two overlapping windows of one array, both read
            spec = ArraySpec(self.fresh("x"), first.dtype, n, "in", base=first.name, start=3)
        elif overlap == "strided":   # every other element: a[::2]
            spec = ArraySpec(self.fresh("x"), self.float_ty, n, "in", step=2)
        if overlap in ("same", "views", "strided"):
            self.arrays.append(spec)
            self.inputs.append(spec)
        self.reshape(first)
        self.inplace = None
        if overlap == "inplace":     # read own element first, write it last
            own = self.array("io", self.float_ty, "own")
            self.inplace = own

    def reshape(self, spec: ArraySpec) -> None:
        """Sometimes reach a contiguous argument only through a 2-D reshape of it."""
        rows = [r for r in (2, 4, 8) if spec.length % r == 0]
        if rows and spec.step == 1 and spec.start == 0 and self.rng.random() < 0.25:
            spec.rows = self.rng.choice(rows)

    # ---- expressions ---------------------------------------------------------------------------
    def index(self, length: int) -> str:
        """An in-bounds index of an input of `length` elements, as text."""
        rng = self.rng
        choice = rng.random()
        if choice < 0.4:
            return "g" if length >= self.blocks * self.threads else f"g % {length}"
        if choice < 0.7:
            return f"(g + {rng.randrange(1, 40)}) % {length}"
        return f"({self.int_expr('i32', 1).render()}) % {length}"

    def load(self, ty: str) -> Expr:
        pool = self.inputs if ty in FLOATS else self.int_inputs
        spec = self.rng.choice(pool)
        array, subscript = spec.at(self.index(spec.length))
        text = f"{array}[{subscript}]"
        if spec.dtype != ty:
            text = f"{zm_type(ty)}({text})"
        return Expr(text.replace("{", "{{").replace("}", "}}"), ty=ty, bound=1.0)

    def expr(self, ty: str, depth: int, det: bool = False) -> Expr:
        if ty == "bool":
            return self.bool_expr(depth)
        if ty in FLOATS:
            return self.float_expr(ty, depth, det)
        return self.int_expr(ty, depth)

    def float_leaf(self, ty: str, det: bool) -> Expr:
        rng = self.rng
        names = [v for v in self.vars.get(ty, []) if not det or v in self.det_vars]
        choice = rng.random()
        if names and choice < 0.55:
            name = rng.choice(names)
            return var(name, ty, det=name in self.det_vars, bound=VBOUND)
        if choice < 0.75 and not self.in_func:
            return self.load(ty)
        if choice < 0.85 and not self.grad:
            inner = self.int_expr(rng.choice(INTS), 0)
            return Expr(f"{zm_type(ty)}({{0}} % 17)", [inner], ty=ty, bound=17.0)
        return lit(rng.choice((0.5, -1.25, 2.0, 0.125, 3.0, -0.75, 1.0)), ty)

    def float_expr(self, ty: str, depth: int, det: bool = False) -> Expr:
        rng = self.rng
        if depth <= 0 or rng.random() < 0.25:
            return self.float_leaf(ty, det)
        if det:       # only ops whose result is the same bits everywhere
            a, b = self.float_expr(ty, depth - 1, True), self.float_expr(ty, depth - 1, True)
            template = rng.choice(("min({0}, {1})", "max({0}, {1})", "(-{0})", "abs({0})",
                                   "math.floor({0})", "math.ceil({0})", "math.copysign({0}, {1})"))
            return Expr(template, [a, b] if "{1}" in template else [a], ty=ty,
                        bound=max(a.bound, b.bound) + 1)
        choice = rng.random()
        a = self.float_expr(ty, depth - 1)
        if choice < 0.35:
            b = self.float_expr(ty, depth - 1)
            op = rng.choice("+-*")
            bound = a.bound * b.bound if op == "*" else a.bound + b.bound
            node = Expr(f"({{0}} {op} {{1}})", [a, b], ty=ty, det=False, bound=bound)
        elif choice < 0.45:
            b = self.float_expr(ty, depth - 1)
            node = Expr("({0} / (1.0 + {1} * {1}))", [a, b], ty=ty, det=False, bound=a.bound)
        elif choice < 0.7:
            template, bound, _ = rng.choice([u for u in _UNARY if (u[2] or not self.grad)
                                             and not self.avoided(u[0])])
            if a.bound > 4.0 and "exp" in template:
                a = self.squash(a)
            node = Expr(template, [a], ty=ty, det=False, bound=float(bound(a.bound)),
                        transcendental=True)
            self.transcendental = True
        elif choice < 0.78:
            b, c = self.float_expr(ty, depth - 1), self.float_expr(ty, depth - 1)
            node = Expr("zm.fma({0}, {1}, {2})", [a, b, c], ty=ty, det=False,
                        bound=a.bound * b.bound + c.bound)
        elif choice < 0.85:
            b = self.float_expr(ty, depth - 1)
            cond = self.bool_expr(1)
            node = Expr("({1} if {0} else {2})", [cond, a, b], ty=ty, det=a.det and b.det,
                        bound=max(a.bound, b.bound))
        elif choice < 0.9 and not self.grad:
            b = self.float_expr(ty, depth - 1)
            node = Expr(rng.choice(("min({0}, {1})", "max({0}, {1})")), [a, b], ty=ty,
                        det=a.det and b.det, bound=max(a.bound, b.bound))
        elif choice < 0.95 and self.funcs_returning(ty):
            return self.call(ty, depth)
        else:
            node = Expr("({0} * {0})" if self.grad else "({0} ** 2)", [a], ty=ty, det=False,
                        bound=a.bound * a.bound)
        return self.squash(node) if node.bound > SQUASH_ABOVE else node

    def bounded(self, ty: str, depth: int) -> Expr:
        """An expression of type `ty`; a float one squashed below VBOUND where it may not be."""
        value = self.expr(ty, depth)
        return self.squash(value) if ty in FLOATS and value.bound > VBOUND else value

    def squash(self, node: Expr) -> Expr:
        template = self.rng.choice(_SQUASH_SMOOTH if self.grad else _SQUASH)
        self.transcendental |= "math." in template
        return Expr(template, [node], ty=node.ty, det=False, bound=1.0,
                    transcendental="math." in template)

    def int_expr(self, ty: str, depth: int) -> Expr:
        rng = self.rng
        if depth <= 0 or rng.random() < 0.3:
            return self.int_leaf(ty)
        a, b = self.int_expr(ty, depth - 1), self.int_expr(ty, depth - 1)
        choice = rng.random()
        if choice < 0.5:
            return Expr(f"({{0}} {rng.choice(_INT_BINARY)} {{1}})", [a, b], ty=ty)
        if choice < 0.6:      # shifts by up to twice the width: past it the result is 0
            amount = rng.randrange(0, 2 * BITS[ty])
            return Expr(f"({{0}} {rng.choice(('<<', '>>'))} ({{1}} & {amount}))", [a, b], ty=ty)
        if choice < 0.68:
            return Expr(rng.choice(("(-{0})", "(~{0})", "min({0}, {1})", "max({0}, {1})")),
                        [a, b], ty=ty)
        if choice < 0.76 and ty in ("i32", "u32", "i64", "u64"):
            fn = rng.choice(("popc", "clz", "ffs", "brev"))
            result = ty if fn == "brev" else "i32"
            node = Expr(f"zm.{fn}({{0}})", [a], ty=result)
            return node if result == ty else Expr(f"{zm_type(ty)}({{0}})", [node], ty=ty)
        if choice < 0.84:
            other = rng.choice(INTS + ("bool",))
            return Expr(f"{zm_type(ty)}({{0}})", [self.expr(other, depth - 1)], ty=ty)
        if choice < 0.9 and not self.grad:      # a float every backend rounds alike
            source = self.float_expr(rng.choice(FLOATS), depth - 1, det=True)
            return Expr(f"{zm_type(ty)}({{0}} * 8.0)", [source], ty=ty)
        if choice < 0.95:
            cond = self.bool_expr(depth - 1)
            return Expr("({1} if {0} else {2})", [cond, a, b], ty=ty)
        if self.funcs_returning(ty):
            return self.call(ty, depth)
        return a

    def int_leaf(self, ty: str) -> Expr:
        rng = self.rng
        choice = rng.random()
        names = self.vars.get(ty, [])
        if names and choice < 0.45:
            return var(rng.choice(names), ty)
        if choice < 0.6 and not self.in_func:
            source = rng.choice(["g", "t", "b", "lane"] + (["tx", "ty", "tz"] if self.width
                                                           else []) + self.loop_vars)
            return Expr(source if ty == "i32" else f"{zm_type(ty)}({source})", ty=ty)
        if choice < 0.75 and not self.in_func:
            return self.load(ty)
        bits = BITS[ty]
        signed = ty.startswith("i")
        special = [0, 1, 2, 3, 7, -1 if signed else (1 << bits) - 1,
                   (1 << (bits - 1)) - 1 if signed else 1 << (bits - 1),
                   -(1 << (bits - 1)) if signed else 5]
        return lit(rng.choice(special + [rng.randrange(-100 if signed else 0, 100)]), ty)

    def bool_expr(self, depth: int, uniform: bool = False) -> Expr:
        """A condition. `uniform`: the same for every thread of the block (scalars, block
        index and uniform loop counters), so collectives may sit under it."""
        rng = self.rng
        if uniform:
            source = rng.choice(["b", "nn"] + self.uniform_loop_vars)
            return Expr(f"({source} {rng.choice(_COMPARE)} {rng.randrange(0, 4)})", ty="bool")
        choice = rng.random()
        if depth <= 0 or choice < 0.45:
            ty = rng.choice(INTS)
            a, b = self.int_expr(ty, depth - 1), self.int_expr(ty, depth - 1)
            return Expr(f"({{0}} {rng.choice(_COMPARE)} {{1}})", [a, b], ty="bool")
        if choice < 0.6 and not self.grad:
            ty = rng.choice(FLOATS)
            a, b = self.float_expr(ty, depth - 1, True), self.float_expr(ty, depth - 1, True)
            return Expr(f"({{0}} {rng.choice(_COMPARE)} {{1}})", [a, b], ty="bool")
        if choice < 0.7 and self.vars.get("bool"):
            return var(rng.choice(self.vars["bool"]), "bool")
        if choice < 0.8:
            return Expr("(not {0})", [self.bool_expr(depth - 1)], ty="bool")
        if choice < 0.9:
            a, b = self.int_expr("i32", 0), self.int_expr("i32", 0)
            c = self.int_expr("i32", 0)
            return Expr("({0} <= {1} < {2})", [a, b, c], ty="bool")
        return Expr(f"({{0}} {rng.choice(('and', 'or'))} {{1}})",
                    [self.bool_expr(depth - 1), self.bool_expr(depth - 1)], ty="bool")

    # ---- device functions ----------------------------------------------------------------------
    def funcs_returning(self, ty: str) -> list[Func]:
        return [f for f in self.funcs if f.ret == ty]

    def call(self, ty: str, depth: int) -> Expr:
        func = self.rng.choice(self.funcs_returning(ty))
        args = [self.expr(pty, depth - 1) for _, pty in func.params]
        holes = ", ".join(f"{{{k}}}" for k in range(len(args)))
        return Expr(f"{func.name}({holes})", args, ty=ty, det=False,
                    bound=SQUASH_ABOVE if ty in FLOATS else 1.0, transcendental=True)

    def make_func(self) -> None:
        """A device function of a float and an integer; maybe with an early return."""
        rng = self.rng
        fty, ity = self.float_ty, rng.choice(INTS)
        name = self.fresh("f")
        saved, saved_det = self.vars, self.det_vars
        self.vars, self.det_vars = {fty: ["p0"], ity: ["p1"]}, set()
        self.in_func = True
        body = []
        if rng.random() < 0.5:
            cond = Expr(f"(p1 {rng.choice(_COMPARE)} {{0}})", [self.int_leaf(ity)], ty="bool")
            body.append(If(cond, [Jump("return " + self.squash(self.float_expr(fty, 2)).render())]))
        body.append(Jump("return " + self.squash(self.float_expr(fty, 2)).render()))
        self.vars, self.det_vars = saved, saved_det
        self.in_func = False
        self.funcs.append(Func(name, [("p0", fty), ("p1", ity)], fty, body))

    # ---- statements ----------------------------------------------------------------------------
    def assign(self) -> Assign:
        rng = self.rng
        ty = rng.choice(list(self.vars))
        name = rng.choice(self.vars[ty])
        if ty in FLOATS:
            det = name in self.det_vars
            value = self.float_expr(ty, rng.randrange(1, 4), det)
            if value.bound > VBOUND and not det:
                value = self.squash(value)
            elif value.bound > VBOUND:         # keep det floats small without rounding
                value = Expr("max(min({0}, 4.0), -4.0)", [value], ty=ty, bound=4.0)
        else:
            value = self.expr(ty, rng.randrange(1, 4))
        return Assign(name, value)

    def float_target(self) -> tuple[str, str]:
        ty = self.float_ty
        free = [v for v in self.vars[ty] if v not in self.det_vars]
        return self.rng.choice(free), ty

    def target(self, ty: str) -> tuple[str, str]:
        """A variable to receive a value computed elsewhere (a shuffle, a neighbour's slot):
        never a det float, whose every assignment must be det."""
        if ty in FLOATS and not [v for v in self.vars[ty] if v not in self.det_vars]:
            ty = self.float_ty
        names = [v for v in self.vars[ty] if v not in self.det_vars]
        return self.rng.choice(names), ty

    def block(self, budget: int, depth: int, level: int, in_loop: bool) -> list:
        """A statement list. `level`: 2 block-uniform, 1 warp-uniform, 0 divergent: which
        collectives may appear. `in_loop`: break/continue allowed."""
        stmts = []
        for _ in range(budget):
            stmts.append(self.statement(depth, level, in_loop))
        return stmts

    def statement(self, depth: int, level: int, in_loop: bool):
        rng = self.rng
        kinds = ["assign"] * 6 + ["store"]
        if depth < 3:
            kinds += ["if", "if", "for", "while"] + (["uniform-if"] if level == 2 else [])
        if level == 2:
            kinds += ["shared", "shared", "global-exchange"] + \
                (["shared-tile", "shared-tile"] if self.width else [])
        if level >= 1:
            kinds += ["shuffle", "shuffle", "vote"]
        if not self.grad or self.slots_in_grad:
            kinds += ["atomic-slot"]
        kinds += ["atomic-acc", "local"]
        if in_loop:
            kinds += ["jump"]
        kind = rng.choice(kinds)
        return getattr(self, "stmt_" + kind.replace("-", "_"))(depth, level, in_loop)

    def stmt_assign(self, depth, level, in_loop):
        return self.assign()

    def stmt_store(self, depth, level, in_loop):
        spec = self.rng.choice(self.outputs)
        value = self.expr(spec.dtype, 2)
        return Store(*spec.at("g"), value, "store")

    def stmt_if(self, depth, level, in_loop):
        cond = self.bool_expr(2)
        then = self.block(self.rng.randrange(1, 4), depth + 1, 0, in_loop)
        orelse = self.block(self.rng.randrange(0, 3), depth + 1, 0, in_loop)
        return If(cond, then, orelse)

    def stmt_uniform_if(self, depth, level, in_loop):
        cond = self.bool_expr(0, uniform=True)
        return If(cond, self.block(self.rng.randrange(1, 3), depth + 1, level, in_loop))

    def stmt_for(self, depth, level, in_loop):
        rng = self.rng
        name = self.fresh("k")
        exits = rng.random() < 0.35
        if self.grad or rng.random() < 0.6:
            bounds = rng.choice(("3", "0, 4", "1, 6, 2", "5, 0, -2", "2"))
            uniform = not exits
        else:          # a per-thread trip count
            bounds = f"({self.int_expr('i32', 1).render()}) % 4"
            uniform = False
        self.loop_vars.append(name)
        if uniform:
            self.uniform_loop_vars.append(name)
        # a per-thread count `(...) % 4` runs at most 3 times
        self.trips.append(3 if "%" in bounds else len(range(*map(int, bounds.split(", ")))))
        # `break`/`continue` only in loops made for them, whose bodies hold no collectives
        body = self.block(rng.randrange(1, 4), depth + 1, level if uniform else 0, exits)
        self.trips.pop()
        if exits:
            body.insert(rng.randrange(len(body) + 1), self.stmt_jump(depth + 1, 0, True))
        self.loop_vars.pop()
        if uniform:
            self.uniform_loop_vars.pop()
        return For(name, bounds, body)

    def stmt_while(self, depth, level, in_loop):
        rng = self.rng
        name = self.fresh("w")
        exits = rng.random() < 0.35
        limit = rng.randrange(0, 4)
        self.trips.append(limit)
        body = self.block(rng.randrange(1, 3), depth + 1, 0 if exits else level, exits)
        self.trips.pop()
        if exits:
            body.insert(rng.randrange(len(body) + 1), self.stmt_jump(depth + 1, 0, True))
        return While(name, limit, body)

    def stmt_jump(self, depth, level, in_loop):
        word = self.rng.choice(("break", "continue"))
        return If(self.bool_expr(1), [Jump(word)])

    def stmt_shared(self, depth, level, in_loop):
        """Own slot, barrier, a neighbour's slot, barrier (before the slot is reused)."""
        rng = self.rng
        ty = rng.choice(list(self.vars)) if not self.grad else self.float_ty
        target, ty = self.target(ty)
        name = self.fresh("sh")
        self.shared.append((name, ty))
        value = self.bounded(ty, 2)
        shift = rng.randrange(1, self.threads)
        if ty != "bool" and not self.grad and rng.random() < 0.4:
            # the neighbours at rotating offsets, in a loop that runs within one phase: an
            # index masked per iteration (`% threads`), which LLVM's loop vectorizer once
            # read as consecutive addresses past the block's end
            r = self.fresh("r")
            lines = [f"{name}[t] = {{0}}", "zm.syncthreads()",
                     f"for {r} in range({rng.randrange(2, 5)}):",
                     f"{INDENT}{target} = max({target}, "
                     f"{name}[(t + {r} * {shift} + {rng.randrange(self.threads)}) % "
                     f"{self.threads}])",
                     "zm.syncthreads()"]
            return Raw(lines, [value], "shared-rotation", collective=True)
        lines = [f"{name}[t] = {{0}}", "zm.syncthreads()",
                 f"{target} = {name}[(t + {shift}) % {self.threads}]", "zm.syncthreads()"]
        return Raw(lines, [value], "shared-exchange", collective=True)

    def stmt_shared_tile(self, depth, level, in_loop):
        """A 2-D (3-D) block's shared tile: own cell [ty, tx] ([tz, ty, tx]), barrier, cells
        of another row (and layer) at rotating columns in a loop, barrier. The masked column
        `(tx + r * s + c) % width` in a loop over r is what LLVM's loop vectorizer once widened
        into consecutive addresses past the row's end, in the CPU backend's loops over a 2-D
        block's threads."""
        rng = self.rng
        ty = self.float_ty if self.grad else rng.choice([t for t in self.vars if t != "bool"])
        target, ty = self.target(ty)
        name = self.fresh("tile")
        self.tiles.append((name, ty))
        value = self.bounded(ty, 2)
        depth, width, r = self.depth, self.width, self.fresh("r")
        rows = self.threads // (width * depth)
        layer = f"(tz + {rng.randrange(depth)}) % {depth}, " if depth > 1 else ""
        cell = (f"{name}[{layer}(ty + {rng.randrange(rows)}) % {rows}, "
                f"(tx + {r} * {rng.randrange(1, width + 1)} + {rng.randrange(width)}) % {width}]")
        own = "[tz, ty, tx]" if depth > 1 else "[ty, tx]"
        # max over the cells (any type), or a contracting sum for derivatives (smooth, and
        # the magnitude stays below VBOUND: (4 + 4) / 4)
        update = f"({target} + {cell}) * 0.25" if self.grad else f"max({target}, {cell})"
        lines = [f"{name}{own} = {{0}}", "zm.syncthreads()",
                 f"for {r} in range({rng.randrange(2, 5)}):", f"{INDENT}{target} = {update}",
                 "zm.syncthreads()"]
        return Raw(lines, [value], "shared-tile", collective=True)

    def stmt_global_exchange(self, depth, level, in_loop):
        """The same through a global scratch array, within the block."""
        ty = self.float_ty
        spec = self.array("gs", ty, "scratch")
        target, _ = self.float_target()
        value = self.squash(self.float_expr(ty, 2))
        shift = self.rng.randrange(1, self.threads)
        tpb = self.threads
        # a fence between the store and the barrier changes nothing here, but every backend
        # must keep the store on its side of both
        fences = [f"zm.{name}()" for name in FENCES]
        fence = [self.rng.choice(fences)] if fences and self.rng.random() < 0.5 else []
        lines = [f"{spec.name}[g] = {{0}}", *fence, "zm.syncthreads()",
                 f"{target} = {spec.name}[b * {tpb} + (t + {shift}) % {tpb}]",
                 "zm.syncthreads()"]
        return Raw(lines, [value], "global-exchange", collective=True)

    def stmt_shuffle(self, depth, level, in_loop):
        rng = self.rng
        ty = self.float_ty if self.grad else rng.choice(list(self.vars))
        target, ty = self.target(ty)
        value = self.bounded(ty, 2)
        # an indexed shuffle's adjoint scatters to arbitrary lanes: zm.grad refuses it cleanly,
        # so the derivative grammar leaves it out to differentiate more programs
        kinds = ("shfl_xor_sync", "shfl_down_sync", "shfl_up_sync")
        kind = rng.choice(kinds if self.grad else kinds + ("shfl_sync",))
        amount = {"shfl_sync": rng.randrange(32), "shfl_xor_sync": 1 << rng.randrange(5)}.get(
            kind, rng.randrange(1, 32))
        if kind == "shfl_sync" and rng.random() < 0.5:
            amount = f"(lane + {rng.randrange(1, 32)}) % 32"
        return Raw([f"{target} = zm.{kind}({FULL}, {{0}}, {amount})"], [value], "shuffle",
                   collective=True)

    def stmt_vote(self, depth, level, in_loop):
        rng = self.rng
        kind = rng.choice(("all_sync", "any_sync", "ballot_sync"))
        cond = self.bool_expr(2)
        if kind == "ballot_sync":
            ty = rng.choice([t for t in self.vars if t in INTS])
            target = rng.choice(self.vars[ty])
            return Raw([f"{target} = {zm_type(ty)}(zm.ballot_sync({FULL}, {{0}}))"], [cond],
                       "vote", collective=True)
        target = rng.choice(self.vars["bool"])
        return Raw([f"{target} = zm.{kind}({FULL}, {{0}})"], [cond], "vote", collective=True)

    def stmt_atomic_slot(self, depth, level, in_loop):
        """Claim a slot with an integer atomic add; the old value indexes an output (compared
        as a multiset: which thread gets which slot depends on the interleaving)."""
        rng = self.rng
        counter = self.array("cnt", rng.choice(("i32", "u32", "i64", "u64")), "counter", 1)
        trips = int(np.prod(self.trips))       # every claim gets its own slot
        ty = rng.choice((self.float_ty, "i32", "i64", "u8"))
        slots = self.array("slots", ty, "slots", self.blocks * self.threads * trips)
        value = self.bounded(ty, 2)
        lines = [f"s_ = zm.atomic.add({counter.name}, 0, 1)",
                 f"if s_ < {slots.length}:",
                 f"    {slots.name}[s_] = {{0}}"]
        return Raw(lines, [value], "atomic-slot")

    def stmt_atomic_acc(self, depth, level, in_loop):
        """An atomic update whose result does not depend on the order (integer add, min, max),
        or float add (order changes only the rounding)."""
        rng = self.rng
        integer = not self.grad and rng.random() < 0.6
        ty = rng.choice(("i32", "u32", "i64", "u64")) if integer else self.float_ty
        spec = self.array("acc", ty, "acc", 4)
        op = rng.choice(("add", "sub", "max", "min")) if integer else rng.choice(("add", "sub"))
        value = self.bounded(ty, 2)
        return Raw([f"zm.atomic.{op}({spec.name}, {self.index(4)}, {{0}})"], [value],
                   "atomic-" + ("int" if integer else "float"))

    def stmt_local(self, depth, level, in_loop):
        """A per-thread local array: store at a computed slot, read another back."""
        rng = self.rng
        ty = self.float_ty if self.grad else rng.choice(list(self.vars))
        target, ty = self.target(ty)
        if not any(n for n, t, _ in self.locals_ if t == ty):
            self.locals_.append((self.fresh("loc"), ty, 4))
        name = next(n for n, t, _ in self.locals_ if t == ty)
        value = self.bounded(ty, 2)
        slot = self.int_expr("i32", 1)
        lines = [f"{name}[({{0}}) % 4] = {{1}}", f"{target} = {name}[({{2}}) % 4]"]
        return Raw(lines, [slot, value, self.int_expr("i32", 1)], "local-array")

    # ---- the program ---------------------------------------------------------------------------
    def declare(self) -> None:
        rng = self.rng
        types = [self.float_ty] * 3 + ["bool"] + [rng.choice(INTS) for _ in range(3)] + ["i32"]
        if not self.grad:
            types += [rng.choice(FLOATS + INTS) for _ in range(2)]
        for ty in types:
            name = self.fresh("v")
            if ty in FLOATS:
                init = self.inplace_load() if self.inplace is not None and \
                    ty == self.inplace.dtype and rng.random() < 0.7 else self.float_leaf(ty, True)
                if rng.random() < 0.3 and not self.grad:
                    self.det_vars.add(name)
            elif ty == "bool":
                init = self.bool_expr(1)
            else:
                init = self.int_leaf(ty)
            self.decls.append((name, ty, init))
            self.vars.setdefault(ty, []).append(name)
        if self.float_ty not in self.vars or \
                all(v in self.det_vars for v in self.vars[self.float_ty]):
            name = self.fresh("v")
            self.decls.append((name, self.float_ty, lit(1.0, self.float_ty)))
            self.vars.setdefault(self.float_ty, []).append(name)

    def inplace_load(self) -> Expr:
        return Expr(f"{self.inplace.name}[g]", ty=self.inplace.dtype, bound=1.0)

    def make_outputs(self) -> None:
        rng = self.rng
        self.outputs = [self.array("y", self.float_ty, "out")]
        self.reshape(self.outputs[0])
        self.outputs.append(self.array("y", rng.choice(INTS), "out"))
        if not self.grad:
            self.outputs.append(self.array("y", rng.choice(FLOATS + INTS + ("bool",)), "out"))
        if self.inplace is not None:     # the in-place array: written (last) where it was read
            spec = ArraySpec(self.fresh("y"), self.inplace.dtype, self.inplace.length, "out",
                             base=self.inplace.name)
            self.arrays.append(spec)
            self.outputs.append(spec)

    def program(self) -> Program:
        rng = self.rng
        self.make_arguments()
        self.make_outputs()
        for _ in range(rng.choice((0, 0, 1, 2))):
            self.make_func()
        self.declare()
        body = self.block(self.size, 0, 2, False)
        # the tail: no collectives, early returns allowed
        tail = self.block(rng.randrange(0, 3), 1, 0, False)
        if rng.random() < 0.4:
            tail.insert(rng.randrange(len(tail) + 1), If(self.bool_expr(1), [Jump("return")]))
        stores = []
        for spec in self.outputs:
            ty = spec.dtype
            names = self.vars.get(ty, [])
            if names:
                value = var(rng.choice(names), ty)
            else:
                value = self.bounded(ty, 1)
            stores.append(Store(*spec.at("g"), value, "store"))
        scalars = [("nn", "i32", rng.randrange(0, 4))]
        return Program(self.seed, self.blocks, self.threads, self.decls, body + tail + stores,
                       self.arrays, scalars, self.funcs, self.shared, self.locals_,
                       grad=self.grad, transcendental=self.transcendental, width=self.width,
                       depth=self.depth, tiles=self.tiles)


def generate(seed: int, grad: bool = False, size: int | None = None,
             avoid_known: bool = False) -> Program:
    """The program for `seed` (the same seed always gives the same program)."""
    size = size if size is not None else random.Random(seed ^ 0x5EED).randrange(4, 14)
    return Generator(seed, grad=grad, size=size, avoid_known=avoid_known).program()
