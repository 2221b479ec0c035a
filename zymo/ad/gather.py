"""Gather-form adjoints of stencil reads (the transposition of PerforAD, Hückelheim et al.,
"Automatic differentiation for adjoint stencil loops", ICPP 2019).

A stencil reads `u[y - 1, x]`, `u[y, x + 1]`, ...: each element is read by several threads, so
the scatter adjoint (every thread adds into the elements it read) needs atomics, which on a GPU
cost an order of magnitude more than the primal. The gather adjoint turns it around: thread p
owns `du[p]` and sums the cotangents of every read of element p. The read with offset o in
thread p - o reaches p, so thread p evaluates that read's cotangent as thread p - o would: it
reruns the kernel's body for the *virtual thread* p - o (the global index shifted; no stores;
a stencil's virtual forward is mostly dead code, as a linear stencil's cotangents need no primal
values) and its reverse sweep, keeping only the cotangents of reads with offset o. Then one
plain update `du[p] += total`.

The output cotangents (`dout`) are read by neighbours this way, so the derivative kernel only
reads them; a second kernel, run right after it by the launch, consumes (zeroes) them, which
keeps Enzyme's semantics without a race.

Applies (`plan`) when the kernel has no loops, barriers, atomics or warp operations, uses the
thread and block indices only through the global index `blockIdx * blockDim + threadIdx`, reads
no array it writes, stores only at indices each thread owns, and an array's every
differentiated read indexes it by the global index plus constant offsets along the same axes,
with at least two different offsets.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.operation import Operation
from ..ir.types import i32
from ..ir.traits import (Allocates, Atomic, Barrier, ConstantLike, Loop, ReadsMemory,
                         ThreadVarying, WritesMemory)
from ..ir.values import BlockArgument
from ..ops import thread
from .activity import accessed_array
from ..passes.indexing import LaunchAssumptions, Register, ThreadAffine


@dataclass
class GatherPlan:
    offsets: dict            # differentiated read -> its offset: ((axis, c), ...) sorted
    axes: dict               # gathered array -> the axis of each index component
    gids: dict               # axis -> the kernel's global index value along it
    zero: tuple              # the offset of a thread's own element

    def distinct_offsets(self) -> list:
        return sorted(set(self.offsets.values()) - {self.zero})


def plan(func, activity, forms, writes: dict) -> GatherPlan | None:
    ops = list(func.body.walk())
    loaded = {accessed_array(op) for op in ops
              if accessed_array(op) is not None and op.has_trait(ReadsMemory)}
    for op in ops:
        if op.has_trait(Loop) or op.has_trait(Barrier) or op.has_trait(Atomic):
            return None
        if op.has_trait(ThreadVarying) and not op.has_trait(Allocates) \
                and _register(op, forms) is None:   # threadIdx only through the global index
            return None
        if op.has_trait(WritesMemory) and accessed_array(op) in loaded:
            return None
    gids = _global_indices(func, forms)
    if gids is None:
        return None
    offsets, axes = {}, {}
    for array in activity.arrays:
        reads = [op for op in ops if accessed_array(op) is array and op.results
                 and not op.has_trait(WritesMemory) and activity.active(op.result)]
        found = [_translation(op, forms) for op in reads]
        if not reads or None in found or len({tuple(a for a, _ in f) for f in found}) != 1 \
                or len({tuple(c for _, c in f) for f in found}) < 2:
            continue
        axes[array] = tuple(a for a, _ in found[0])
        if not set(axes[array]) <= set(gids):
            return None
        for op, f in zip(reads, found):
            offsets[op] = tuple(sorted(f))
    if not offsets:
        return None
    all_axes = {a for array_axes in axes.values() for a in array_axes}
    if len({tuple(sorted(axes_)) for axes_ in axes.values()}) != 1:
        return None
    zero = tuple((a, 0) for a in sorted(all_axes))
    return GatherPlan(offsets, axes, gids, zero)


def launch_assumptions(plan_: GatherPlan, stores: list, forms) -> LaunchAssumptions | None:
    """Threads along axes the stencil does not use would update the same elements, every
    element of a gathered array needs its thread, and the derivative's stores (zeroed by the
    consuming kernel) must be owned by their threads."""
    used = {a for array_axes in plan_.axes.values() for a in array_axes}
    # thread p gathers the cotangents of element p: every element some thread reads needs
    # its thread, so the launch must span each gathered array's extent along its axes
    covers = set()
    for array, array_axes in plan_.axes.items():
        if not isinstance(array, BlockArgument):
            return None
        covers |= {(axis, ("dim", array.index, k)) for k, axis in enumerate(array_axes)}
    assumed = LaunchAssumptions(frozenset("xyz") - used, covers=frozenset(covers))
    for store in stores:
        owned = forms.ownership(list(store.indices), store.array.type.space)
        if owned is None:
            return None
        if store.array.type.space != "local":
            assumed = assumed.combine(LaunchAssumptions.owning(owned))
    return assumed


def _translation(op: Operation, forms) -> tuple | None:
    """((axis, c), ...) per index component when each is the global index plus a constant."""
    out = []
    for index in op.indices:
        form = forms.form(index)
        if not isinstance(form, ThreadAffine) or form.base != "gid":
            return None
        shift = 0
        for sign, value, _ in form.parts:
            if isinstance(value, BlockArgument) or not value.owner.has_trait(ConstantLike) \
                    or not isinstance(value.owner.value, int):
                return None
            shift += sign * value.owner.value
        out.append((form.axis, shift))
    if len({a for a, _ in out}) != len(out):
        return None
    return tuple(out)


def _global_indices(func, forms) -> dict | None:
    """axis -> the value `blockIdx * blockDim + threadIdx`, when the thread and block indices
    are used for nothing else (the virtual threads replace exactly these values)."""
    gids: dict = {}
    for op in func.body.walk():
        register = _register(op, forms)
        if register is None:
            continue
        name, axis = register
        for use in op.result.uses:
            user = use.operation
            if name == "ctaid":   # blockIdx * blockDim, then + threadIdx
                if not all(_is_gid(u.operation, forms) for u in user.result.uses):
                    return None
                continue
            if not _is_gid(user, forms):
                return None
        for use in op.result.uses:
            final = use.operation if name == "tid" else None
            if final is not None:
                if gids.setdefault(axis, final.result) is not final.result:
                    return None
    return gids


def _register(op: Operation, forms) -> tuple | None:
    """("tid", axis) for a read of threadIdx, ("ctaid", axis) for blockIdx, else None (by the
    index forms the ops' rules give)."""
    if op.operands or len(op.results) != 1:
        return None
    form = forms.form(op.result)
    if isinstance(form, ThreadAffine) and form.base == "tid" and not form.offset:
        return ("tid", form.axis)
    if isinstance(form, Register) and form.name == "ctaid":
        return ("ctaid", form.axis)
    return None


def _is_gid(op: Operation, forms) -> bool:
    form = forms.form(op.results[0]) if op.results else None
    return isinstance(form, ThreadAffine) and form.base == "gid" and not form.offset


def consume_function(primal, derivative, kinds: list[str], name: str):
    """The kernel the launch runs after a gathering derivative: with the derivative's
    arguments, it zeroes the output cotangents (the shadow of every element the primal stores)
    and does nothing else.

    A store or two per thread: launched as the primal is, its time went to scheduling blocks
    (as long as the primal's on a 4096^2 stencil). So it takes one more argument, C, and each
    of its threads does the work of C threads: the blocks C * b .. C * b + C - 1 along x of the
    primal's launch, one after the other (consecutive threads still store consecutive
    elements); the launch makes 1/C as many blocks along x (`coarsening`)."""
    from ..ir.builder import Builder
    from ..ir.operation import Region
    from ..ops import arith, control, memory
    region = Region()
    block = region.block
    mapping, shadows = {}, {}
    args = iter(derivative.args)
    for arg, kind in zip(primal.args, kinds):
        new = next(args)
        mapping[arg] = block.add_arg(new.type, new.name_hint)
        if kind in ("dup", "dup_noneed", "active"):
            extra = next(args)
            value = block.add_arg(extra.type, extra.name_hint)
            if kind != "active":
                shadows[arg] = value
    for op in primal.body.block.ops:
        block.append(op.clone(mapping))
    builder = Builder()
    stored = {mapping[a]: s for a, s in shadows.items()}
    for op in list(region.walk()):
        if not op.has_trait(WritesMemory):
            continue
        shadow = stored.get(op.operands[0])
        if shadow is not None and not op.has_trait(ReadsMemory):
            builder.block, builder.index = op.parent, op.parent.ops.index(op)
            with builder.location(op.loc):
                zero = builder.value(arith.Constant, value=0.0, type=shadow.type.dtype)
                builder.create(memory.Store, shadow, *op.indices, zero)
        op.erase()
    _coarsen(region, builder)
    ftype = derivative.attrs["function_type"]
    ftype = type(ftype)(ftype.inputs + (i32,), ftype.outputs)
    attrs = dict(derivative.attrs, sym_name=name, function_type=ftype,
                 arg_names=tuple(derivative.attrs.get("arg_names", ())) + ("coarsen",))
    return control.Func([], [], attrs, [region], loc=primal.loc)


def _coarsen(region, builder) -> None:
    """Wrap the body in `for c in range(C)` (C: a new last argument) with blockIdx.x read as
    C * blockIdx.x + c and gridDim.x as C * gridDim.x."""
    from ..ir.operation import Region
    from ..ops import arith, control
    block = region.block
    count = block.add_arg(i32, "coarsen")
    body = Region()
    c = body.block.add_arg(i32, "c")
    terminator = block.ops[-1]
    for op in list(block.ops[:-1]):
        op.detach()
        body.block.append(op)
    builder.block, builder.index = body.block, len(body.block.ops)
    builder.create(control.Yield)
    for op in list(body.walk()):
        if isinstance(op, (thread.BlockIdx, thread.GridDim)) and op.axis == "x":
            uses = list(op.result.uses)
            builder.block, builder.index = op.parent, op.parent.ops.index(op) + 1
            with builder.location(op.loc):
                scaled = builder.value(arith.Mul, op.result, count)
                if isinstance(op, thread.BlockIdx):
                    scaled = builder.value(arith.Add, scaled, c)
            for use in uses:
                use.operation.set_operand(use.index, scaled)
    builder.block, builder.index = block, block.ops.index(terminator)
    with builder.location(terminator.loc):
        zero, one = (builder.value(arith.Constant, value=v, type=i32) for v in (0, 1))
        builder.create(control.For, zero, count, one, result_types=[], regions=[body])


def coarsening(grid_x: int) -> int:
    """How many of the primal's blocks along x each consuming block does."""
    return next(c for c in (8, 4, 2, 1) if grid_x % c == 0)
