"""While loops that count: versioned into a `range` loop where the counter cannot wrap.

zymo integers wrap, so `while i < n: ...; i += s` with an i32 `i` may legally run past
2**31 and come back negative; LLVM must assume it can, finds no trip count, and neither
unrolls nor pipelines the loop (the grid-stride loop of a reduction ran 1.6x slower than
nvcc's, which may assume signed overflow never happens). CUDA C buys the trip count with
undefined behaviour; we buy it with a test at run time, as LLVM's loop versioning does:

    if s > 0 and n <= MAX - s + 1:      # then no `i + s` of the loop can wrap
        for i in range(i0, n, s): ...   # zymo computes its trip count
    else:
        while i < n: ...; i += s        # the loop as written

Both copies compute the same values, so the choice never changes a result. Recognised:
`i < n`, `i <= n` (and `n > i`, `n >= i`) on a signed integer carried value `i`, compared
as it is or sign-extended to a wider signed type, with `n` and `s` defined outside the loop
and `i` advanced by exactly `i + s` on every path. Loops with barriers or warp operations
are left alone: threads taking different copies must not meet at a convergent op.

This is a code-generation pass: it runs on a copy of the optimized IR just before lowering
(`codegen_stages`), so differentiation and evolution see the loop as written.
"""
from __future__ import annotations

import numpy as np

from ..ir.builder import Builder
from ..ir.module import Module
from ..ir.operation import Block, Region
from ..ir.traits import Barrier, Convergent
from ..ir.types import Scalar
from ..ir.values import BlockArgument, OpResult, Value
from ..ops.arith import Add, BitAnd, BitOr, Cast, Cmp, Constant, Not, Sub
from ..ops.control import For, If, While, Yield
from .common import is_inside, loop_step

# the predicate of `i <op> n` after putting `i` on the left
_MIRRORED = {"lt": "lt", "le": "le", "gt": "lt", "ge": "le"}


class CountedWhile:
    """Version each counting `while` into a `range` loop guarded by a no-wrap test.
    Verified IR in, verified IR out."""

    name = "counted-while"

    def run(self, module: Module) -> bool:
        changed = False
        for func in module:
            loops = [op for op in func.walk() if isinstance(op, While)]
            for loop in reversed(loops):  # inner loops first: outer clones carry them along
                found = _counting(loop)
                if found is not None:
                    _version(loop, *found)
                    changed = True
        return changed


def _counting(loop: While):
    """(index of the counter, bound n, step s, predicate) when `loop` counts, else None."""
    if any(op.has_trait(Barrier) or op.has_trait(Convergent)
           for region in loop.regions for op in region.walk()):
        return None
    before = loop.before.block.ops
    cond = before[-1].operands[0]
    if not isinstance(cond, OpResult) or not isinstance(cond.owner, Cmp):
        return None
    cmp = cond.owner
    predicate = cmp.predicate
    if predicate not in _MIRRORED:
        return None
    counter_side, bound = cmp.operands if predicate in ("lt", "le") else cmp.operands[::-1]
    if is_inside(bound, loop) or not _signed(bound.type):
        return None
    counter = _widened_argument(counter_side, loop.before.block)
    if counter is None or len(before) != (3 if counter is not counter_side else 2):
        return None  # other work in the condition region would run one more time than the body
    index = counter.index
    if not _signed(counter.type) or counter.type.bits > bound.type.bits:
        return None
    body = loop.body.block
    step = loop_step(loop, body.args[index], body.ops[-1].operands[index])
    if step is None:
        return None
    return index, bound, step, _MIRRORED[predicate]


def most_trips(loop: While) -> tuple[int, int, int, int] | None:
    """(index of a counter, its start, its step, the most trips) when the condition of `loop`
    holds only while a counter that starts at a constant and moves by a constant on every trip
    stays on one side of a constant: `while i < 3`, `while i > 0` with `i -= 2`, or a `range`
    with a `break` (the frontend's `not broken and i < n`, `i > n` counting down); else None.
    So the trip number of a trip is `(i - start) // step`, and a loop whose other exits
    (breaks) end it earlier still makes at most that many trips."""
    body = loop.body.block
    found = None
    for index, arg in enumerate(body.args):
        start, step = _int_constant(loop.inits[index]), _constant_step(loop, index)
        if start is None or not step:
            continue
        direction = 1 if step > 0 else -1
        last = _last_value(loop.before.block.ops[-1].operands[0], loop.before.block.args[index],
                           direction)
        if last is None:
            continue
        info = np.iinfo(arg.type.dtype)
        # the first value past the last one the condition allows must not wrap around
        if not info.min <= last + step <= info.max and abs(last) < _NEVER:
            continue
        trips = max(0, (last - start) // step + 1)
        if found is None or trips < found[3]:
            found = (index, start, step, trips)
    return found


_NEVER = 1 << 80   # beyond every integer type: the last value of a constant false condition
_FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _last_value(cond: Value, counter: BlockArgument, direction: int) -> int | None:
    """The largest (direction 1) or smallest (-1) value of `counter` for which `cond` can be
    true, where the comparisons of `cond` show one; else None."""
    if not isinstance(cond, OpResult):
        return None
    op = cond.owner
    if isinstance(op, Constant):
        return -direction * _NEVER if not op.value else None
    if isinstance(op, Cmp) and op.predicate in _FLIPPED:
        lhs, rhs = op.operands
        predicate = op.predicate
        if _widened_argument(rhs, counter.block) is counter:   # n < i is i > n
            lhs, rhs, predicate = rhs, lhs, _FLIPPED[predicate]
        limit = _int_constant(rhs)
        if limit is None or _widened_argument(lhs, counter.block) is not counter:
            return None
        return {(1, "lt"): limit - 1, (1, "le"): limit, (-1, "gt"): limit + 1,
                (-1, "ge"): limit}.get((direction, predicate))
    if isinstance(op, BitAnd):   # either side's bound holds: the tighter one
        found = [b for b in (_last_value(v, counter, direction) for v in op.operands)
                 if b is not None]
        return (min if direction > 0 else max)(found) if found else None
    if isinstance(op, If):       # each branch's yielded condition must be bounded
        index = op.results.index(cond)
        found = [_last_value(region.block.ops[-1].operands[index], counter, direction)
                 for region in op.regions]
        return None if None in found else (max if direction > 0 else min)(found)
    return None


def _constant_step(loop: While, index: int) -> int | None:
    """c when every trip that another trip follows yields `arg + c` for carried value
    `index` (c an integer constant): on the paths that do not (a `break`), the values yielded
    make the loop's condition false."""
    arg = loop.body.block.args[index]
    if not (isinstance(arg.type, Scalar) and arg.type.is_int):
        return None
    steps = _steps(loop, loop.body.block, index)
    return steps.pop() if steps is not None and len(steps) == 1 else None


def _steps(loop: While, block: Block, index: int) -> set | None:
    """The steps the paths through `block` give the counter: the body, or a branch of an `if`
    whose results the enclosing block yields as they are (so each block here yields the
    carried values in order). Paths whose yields end the loop (a `break`) give none; None
    where a path is not shown to step or end."""
    yielded = list(block.ops[-1].operands)
    value, arg = yielded[index], loop.body.block.args[index]
    if isinstance(value, OpResult) and isinstance(value.owner, Add):
        lhs, rhs = value.owner.operands
        step = _int_constant(rhs if lhs is arg else lhs if rhs is arg else None)
        return None if step is None else {step}
    if block is not loop.body.block and _ends_the_loop(loop, yielded):
        return set()
    if isinstance(value, OpResult) and isinstance(value.owner, If) \
            and yielded == list(value.owner.results):
        found = set()
        for region in value.owner.regions:
            inner = _steps(loop, region.block, index)
            if inner is None:
                return None
            found |= inner
        return found
    return None


def _ends_the_loop(loop: While, yielded) -> bool:
    """The condition is false for the values `yielded` (a `break` flag set: some of them bool
    constants)."""
    before = loop.before.block
    known = {arg: v.owner.value for arg, v in zip(before.args, yielded) if _is_bool_constant(v)}
    return _evaluate(before.ops[-1].operands[0], known) is False


def _is_bool_constant(value: Value) -> bool:
    return isinstance(value, OpResult) and isinstance(value.owner, Constant) \
        and isinstance(value.type, Scalar) and value.type.name == "bool"


def _evaluate(value: Value, known: dict):
    """The bool `value` is when the condition region's bool arguments in `known` have those
    values, or None: constants, `not`, `and`, `or` and `if` (the frontend's `break` flag and
    short-circuit forms)."""
    if value in known:
        return bool(known[value])
    if not isinstance(value, OpResult):
        return None
    op = value.owner
    if isinstance(op, Constant):
        return bool(op.value)
    if isinstance(op, Not):
        inner = _evaluate(op.operands[0], known)
        return None if inner is None else not inner
    if isinstance(op, (BitAnd, BitOr)):
        parts = [_evaluate(v, known) for v in op.operands]
        absorbing = isinstance(op, BitOr)    # True absorbs an `or`, False an `and`
        if absorbing in parts:
            return absorbing
        return None if None in parts else not absorbing
    if isinstance(op, If):
        index = op.results.index(value)
        cond = _evaluate(op.operands[0], known)
        branches = [_evaluate(r.block.ops[-1].operands[index], known) for r in op.regions]
        if cond is not None:
            return branches[0 if cond else 1]
        return branches[0] if branches[0] == branches[1] else None
    return None


def _int_constant(value: Value | None) -> int | None:
    if isinstance(value, OpResult) and isinstance(value.owner, Constant) \
            and isinstance(value.type, Scalar) and value.type.is_int:
        return int(value.owner.value)
    return None


def _signed(type) -> bool:
    return isinstance(type, Scalar) and type.is_signed


def _widened_argument(value: Value, block: Block) -> BlockArgument | None:
    """The block argument that `value` is, or sign-extends; else None."""
    if isinstance(value, BlockArgument):
        return value if value.block is block else None
    if isinstance(value, OpResult) and isinstance(value.owner, Cast):
        source = value.owner.operands[0]
        if (isinstance(source, BlockArgument) and source.block is block and _signed(source.type)
                and source.type.bits <= value.type.bits):
            return source
    return None


def _version(loop: While, index: int, bound: Value, step: Value, predicate: str) -> None:
    b = Builder()
    b.loc = loop.loc
    counter_type = loop.inits[index].type
    wide = bound.type
    info = np.iinfo(counter_type.dtype)
    with b.before(loop):
        zero = _constant(b, 0, counter_type)
        wide_step = step if wide == counter_type else b.value(Cast, step, to=wide)
        # n <= MAX - s + 1 (or n <= MAX - s for `<=`): computed without overflow as s > 0
        limit = b.value(Sub, _constant(b, int(info.max), wide), wide_step)
        if predicate == "lt":
            limit = b.value(Add, limit, _constant(b, 1, wide))
        positive = b.value(Cmp, step, zero, predicate="gt")
        fits = b.value(Cmp, bound, limit, predicate="le")
        guard = b.value(BitAnd, positive, fits)
        if wide != counter_type:
            above = b.value(Cmp, bound, _constant(b, int(info.min), wide), predicate="ge")
            guard = b.value(BitAnd, guard, above)
    counted = Region()
    with b.at_end(counted.block):
        upper = bound if predicate == "lt" else b.value(Add, bound, _constant(b, 1, wide))
        if wide != counter_type:
            upper = b.value(Cast, upper, to=counter_type)
        ranged = b.create(For, loop.inits[index], upper, step, *loop.inits,
                          result_types=[v.type for v in loop.results],
                          regions=[_counted_body(loop.body.block, index)])
        b.create(Yield, *ranged.results, result_types=[])
    fallback = Region()
    with b.at_end(fallback.block):
        original = loop.clone({})
        b.insert(original)
        b.create(Yield, *original.results, result_types=[])
    with b.before(loop):
        versioned = b.create(If, guard, result_types=[r.type for r in loop.results],
                             regions=[counted, fallback])
    for old, new in zip(loop.results, versioned.results):
        old.replace_all_uses_with(new)
    loop.erase()


def _counted_body(old: Block, index: int) -> Region:
    """The while body as a `for` body: the iv takes the place of the counter, which stays
    carried (now unused inside) so that the loop's results keep their meaning."""
    counter = old.args[index]
    block = Block([counter.type, *(a.type for a in old.args)],
                  [counter.name_hint, *(a.name_hint for a in old.args)])
    mapping: dict[Value, Value] = {arg: block.args[k + 1] for k, arg in enumerate(old.args)}
    mapping[counter] = block.args[0]
    for op in old.ops:
        block.append(op.clone(mapping))
    return Region(block)


def _constant(b: Builder, value: int, type: Scalar) -> Value:
    return b.value(Constant, value=type.dtype.type(value).item(), type=type)
