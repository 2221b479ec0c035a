"""The reverse transform's plan: which strategy each memory access's adjoint gets, decided
once, before anything is emitted, and the launch conditions those strategies assume.

A read's cotangent reaches its shadow (`read_modes`) by a plain update where each thread owns
its elements ("plain"; "batched" across a small static loop), a slot of its own in a shared
scratch array that the storing thread sums ("transposed", `transpose`), a warp-aggregated
atomic where the address is uniform ("uniform", through a block-private copy when `private`
holds the array) or the same for threads that differ only along x ("grouped": runs of a warp's
lanes), a gathered sum where a stencil's neighbours read it (`gather`), or an atomic. Stores
may be batched (`batched`) or have their cotangents read together (`store_groups`); loops may be
reversed iteration by iteration (`fused`). The plan also answers what the recomputation part
asks of memory: whether an op can run again in the reverse sweep (`not_recomputable`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.operation import Operation
from ..ir.traits import (Allocates, Atomic, Barrier, CallsFunction, Conditional, ConstantLike,
                         Convergent, CountedLoop, Fence, GridSync, Loop, OrderDependent, Pure,
                         ReadsMemory, Terminator, WritesMemory)
from ..ir.values import BlockArgument, Value
from ..ops.views import array_origin
from ..passes.indexing import IndexForms, LaunchAssumptions, same_along_x, uniform
from . import gather, interleave, loopsums, private, refill, transpose
from .activity import ActivityAnalysis, accessed_array

MAX_BATCHED = 64   # loop trips whose shadow updates are batched (per-thread arrays of this size)


@dataclass(frozen=True)
class AccessPlan:
    func: object
    activity: ActivityAnalysis
    forms: IndexForms
    noalias: bool            # distinct array arguments do not overlap
    writes: dict             # array class -> the ops that write it
    top_index: dict          # top-level op -> its position
    read_modes: dict         # differentiated read -> plain, batched, uniform, grouped, gather,
    #                          transposed, atomic
    batched: dict            # read or store -> static trips of its batched loop
    store_groups: frozenset  # stores whose cotangents are read when their block's reversal starts
    gather: gather.GatherPlan | None
    fused: frozenset         # loops reversed iteration by iteration (`interleave`)
    private: private.Privatized | None
    accumulators: dict       # read -> its `private.Accumulator`
    tiled: tuple | None      # (read, loop) of `private.plan_tile`
    assumptions: LaunchAssumptions
    # local arrays every iteration of a loop fills before reading: read again after the
    # reverse iteration runs the fill again (`refill`)
    fills: dict = field(default_factory=dict)
    transposed: transpose.TransposePlan | None = None   # shared reads summed by their storers
    written_back: frozenset = frozenset()   # plain reads whose adjoint stores (`_written_back`)

    def array_class(self, array: Value):
        return _array_class(array, self.noalias)

    def safe_load(self, op: Operation) -> bool:
        """No write to the loaded array can follow this load (so reading it again later in
        the reverse sweep gives the same value)."""
        if self.array_class(op.array) in self.fills:
            return True
        writes = self.writes.get(self.array_class(op.array), ())
        return all(_before(w, op) for w in writes) and self.racing_update(op) is None

    def racing_update(self, op: Operation) -> Operation | None:
        """An update of the array `op` reads whose effect on the read depends on how threads
        interleave (an atomic: other threads' atomics may land after this thread's read, in
        any order), so reading it again need not give the value the forward sweep saw."""
        for write in self.writes.get(self.array_class(op.array), ()):
            if write.has_trait(OrderDependent):
                return write
        return None

    def not_recomputable(self, op: Operation, drop_writes: bool = False) -> str:
        """Why `op` cannot run again in the reverse sweep ("" if it can). With `drop_writes`,
        writes whose results nothing uses are fine: the copy leaves them out (`without_writes`):
        a loop's slice that recomputes a carried value need not redo the loop's stores."""
        for inner in op.walk():
            if inner.has_trait(Terminator):
                continue
            if inner.has_trait(Allocates) and not inner.has_trait(Pure):   # const: remade
                return "it is an array allocation"
            if drop_writes and droppable_write(inner):
                continue
            if inner.has_trait(OrderDependent) and any(r.has_uses for r in inner.results):
                return (f"`{inner.name}` (line {inner.loc.line}) gives a value that depends on "
                        f"how threads interleave: run again it may give another one")
            if inner.has_trait(WritesMemory) or inner.has_trait(Barrier):
                return f"its computation at line {inner.loc.line} writes memory"
            array = accessed_array(inner) if inner.has_trait(ReadsMemory) else None
            if array is not None and self.racing_update(inner) is not None:
                update = self.racing_update(inner)
                return (f"it reads `{array.name_hint or 'an array'}` (line {inner.loc.line}), "
                        f"which atomics update (line {update.loc.line}): read again it may "
                        f"hold other threads' updates")
            if array is not None and not self.safe_load(inner):
                name = array.name_hint or "an array"
                return f"it reads `{name}` (line {inner.loc.line}), which is written later"
        return ""

    def order_hint(self, op: Operation, fallback: str) -> str:
        """What to write instead when `op`'s computation cannot run again: for an
        order-dependent value, how to let the derivative keep it."""
        if not any(inner.has_trait(OrderDependent) or inner.has_trait(ReadsMemory)
                   and accessed_array(inner) is not None and self.racing_update(inner)
                   for inner in op.walk()):
            return fallback
        return ("the derivative keeps such a value on a tape only in loops whose trip counts "
                "the launch can compute (range over constants, scalar arguments and array "
                "extents, not values read from memory): write the loop that way, or take the "
                "atomic (or activemask) out of the loop")


def plan_accesses(func, activity: ActivityAnalysis, noalias: bool,
                  plain_updates: bool) -> AccessPlan:
    forms = IndexForms(func)
    writes: dict = {}
    for op in func.body.walk():
        array = accessed_array(op)
        if array is not None and op.has_trait(WritesMemory):
            writes.setdefault(_array_class(array, noalias), []).append(op)
    loaded = {_array_class(accessed_array(op), noalias) for op in func.body.walk()
              if accessed_array(op) is not None and op.has_trait(ReadsMemory)}
    batched: dict = {}
    read_modes, assumed = _read_modes(func, activity, forms, writes, noalias, plain_updates,
                                      batched)
    groups: set = set()
    found = None
    if plain_updates:
        assumed = _batch_stores(activity, forms, writes, loaded, batched, assumed)
        groups, assumed = _store_groups(activity, forms, writes, loaded, assumed)
        found = gather.plan(func, activity, forms, writes)
    if found is not None:
        stores = [op for op in func.body.walk() if op.has_trait(WritesMemory)
                  and activity.is_active_array(accessed_array(op))]
        gathered = gather.launch_assumptions(found, stores, forms)
        if gathered is None:
            found = None
        else:
            assumed = assumed.combine(gathered)
            for op in found.offsets:
                read_modes[op] = "gather"
            batched = {op: t for op, t in batched.items() if op not in found.offsets}
            groups = set()   # neighbours read the output cotangents: no zeroing here
    transposed = transpose.plan(func, forms, read_modes) \
        if plain_updates and found is None else None
    if transposed is not None:
        read_modes.update({op: "transposed" for op in transposed.reads})
        assumed = assumed.combine(transposed.assumptions())
    fused = interleave.plan(func, activity.reversed_ops,
                            lambda array: _array_class(array, noalias), batched) \
        if found is None and noalias and func.attrs.get("kind") == "kernel" else set()
    privatized = private.plan(func, activity, read_modes, writes) if plain_updates else None
    loads: dict = {}
    for op in read_modes:
        loads.setdefault(op.array, []).append(op)
    accumulators = private.plan_accumulators(func, forms, read_modes, writes, loads)
    accumulators.update(loopsums.plan(forms, read_modes, writes,
                                      lambda array: _array_class(array, noalias)))
    tiled = private.plan_tile(func, forms, read_modes, privatized)
    if privatized is not None:
        assumed = assumed.combine(
            LaunchAssumptions(budgets=frozenset({private.budget(privatized)})))
    fills = refill.plan(func, writes)
    if plain_updates:   # the all-atomic variant, for launches whose blocks are too small
        tiles, blocks = refill.plan_shared(func, writes, forms)
        fills.update(tiles)
        assumed = assumed.combine(LaunchAssumptions(blocks=blocks))
    return AccessPlan(func, activity, forms, noalias, writes,
                      {op: k for k, op in enumerate(func.body.block.ops)}, read_modes, batched,
                      frozenset(groups), found, frozenset(fused), privatized, accumulators,
                      tiled, assumed, fills, transposed, _written_back(read_modes, noalias))


def _before(write: Operation, read: Operation) -> bool:
    """`write` runs before `read` and never after it: in the innermost block holding both, the
    op holding the write comes before the op holding the read, and no loop holds that block
    (a later iteration would write again)."""
    holders = {}
    op = write
    while op is not None:
        holders[id(op.parent)] = op
        op = op.parent_op
    op = read
    while op is not None:
        mine = holders.get(id(op.parent))
        if mine is not None:
            block = op.parent
            if mine is op or block.ops.index(mine) > block.ops.index(op):
                return False
            return not any(outer.has_trait(Loop) for outer in op.ancestors())
        op = op.parent_op
    return False


def _array_class(array: Value, noalias: bool):
    """The memory an access reaches: its array's origin (a reshape of an argument is the
    argument), or all the arguments where they may overlap."""
    origin = array_origin(array)
    if not noalias and isinstance(origin, BlockArgument):
        return "arguments"   # arguments may overlap: one class
    return origin


def _read_modes(func, activity, forms, writes, noalias, plain_updates, batched):
    """How each read's adjoint updates the shadow ("plain", "uniform", "grouped" or "atomic"), and
    the launch conditions the plain ones assume (thread axes used, wrap-around bounds)."""
    modes: dict = {}
    assumed = LaunchAssumptions()
    loads: dict = {}
    for op in func.body.walk():
        array = accessed_array(op)
        if array is None or op.has_trait(WritesMemory) or not op.results:
            continue
        if activity.is_active_array(array) and activity.active(op.result):
            loads.setdefault(array, []).append(op)
    for array, ops in loads.items():
        found = [tuple(forms.form(i) for i in op.indices) for op in ops]
        space = array.type.space
        owned = None
        if space == "local" or plain_updates and len(set(found)) == 1:
            owned = forms.ownership(list(ops[0].indices), space)
        if owned is not None and space != "local" and owned.axes < forms.thread_axes(space):
            # threads along an axis the index does not use share its elements: plain
            # updates would need one thread along it, which the kernel's own indexing along
            # that axis says the launch will not have (the whole variant would fall back)
            owned = None
        if owned is not None:
            # batched across a loop: nothing else may touch the shadow (the array is never
            # written) and the read is the array's only one
            trips = loop_trips(ops[0]) if space == "global" and len(ops) == 1 \
                and not writes.get(_array_class(array, noalias)) else None
            for op in ops:
                modes[op] = "batched" if trips else "plain"
                if trips:
                    batched[op] = trips
            if space != "local":
                assumed = assumed.combine(LaunchAssumptions.owning(owned))
            continue
        for op, form in zip(ops, found):
            modes[op] = "plain" if updated_in_place(op) is not None \
                else "uniform" if uniform(list(form)) \
                else "grouped" if same_along_x(list(form)) else "atomic"
    return modes, assumed


def updated_in_place(read: Operation) -> Operation | None:
    """The store that writes back the element `read` reads before any other thread can reach
    it (`a[i] = a[i] + v`), or None: a plain store to the same array at the same index values
    later in the read's block, with nothing between that synchronizes threads (barriers,
    fences, atomics, warp collectives, calls). A race-free kernel then lets no other thread
    read or write the element between the two (a store's adjoint already relies on that), so
    the read's cotangent is a plain update as well: without it, the adjoint of an in-place add
    loaded the shadow, zeroed it and added it back atomically."""
    block = read.parent
    for op in block.ops[block.ops.index(read) + 1:]:
        if any(inner.has_trait(t) for inner in op.walk()
               for t in (Barrier, GridSync, Fence, Atomic, Convergent, CallsFunction)):
            return None
        if op.has_trait(WritesMemory) and not op.has_trait(ReadsMemory) \
                and accessed_array(op) is read.array \
                and len(op.indices) == len(read.indices) \
                and all(a is b for a, b in zip(op.indices, read.indices)):
            return op
    return None


def _written_back(read_modes: dict, noalias: bool) -> frozenset:
    """Plain reads whose element the thread writes back (`updated_in_place`) with no other
    access to the array's memory between: the store's adjoint left the shadow element zero and
    nothing else reaches it before the read's adjoint, which can therefore store its cotangent
    instead of adding it (LLVM then drops the zeroing store, and a store of the value the
    shadow already held)."""
    found = set()
    for read, mode in read_modes.items():
        store = updated_in_place(read) if mode == "plain" else None
        if store is None:
            continue
        block, memory_class = read.parent, _array_class(read.array, noalias)
        between = block.ops[block.ops.index(read) + 1:block.ops.index(store)]
        if not any(accessed_array(inner) is not None
                   and _array_class(accessed_array(inner), noalias) == memory_class
                   for op in between for inner in op.walk()):
            found.add(read)
    return frozenset(found)


def _batch_stores(activity, forms, writes, loaded, batched, assumed):
    """Batch the adjoints of stores (`Batch`) that sit in a loop as `loop_trips` requires,
    write an array nothing reads and no other store writes, at an index each thread owns."""
    for array, ops in writes.items():
        # several stores: only where a thread runs one of them (the branches of an `if`, as
        # a lattice cell either bounces back or collides), so each batch is the only access
        # to its elements while it runs
        if array == "arguments" or array in loaded or not _exclusive(ops) \
                or array.type.space != "global" or not activity.is_active_array(array):
            continue
        found = []
        for op in ops:
            plain_store = not op.has_trait(ReadsMemory) and not op.has_trait(Atomic)
            trips = loop_trips(op) if plain_store else None
            owned = forms.ownership(list(op.indices), "global") if trips else None
            if owned is None:
                break
            found.append((op, trips, owned))
        else:
            for op, trips, owned in found:
                batched[op] = trips
                assumed = assumed.combine(LaunchAssumptions.owning(owned))
    return assumed


def _exclusive(ops) -> bool:
    """Whether at most one of `ops` runs in a thread: one op, or ops in different regions of
    the `Conditional` op closest around each pair."""
    def regions_up(op):
        chain = {}
        while op.parent is not None and op.parent.parent is not None:
            region = op.parent.parent
            op = region.parent
            chain[op] = region
        return chain
    chains = [regions_up(op) for op in ops]
    for i, first in enumerate(ops):
        for j in range(i + 1, len(ops)):
            common = next((op for op in chains[j] if op in chains[i]), None)
            if common is None or not common.has_trait(Conditional) \
                    or chains[i][common] is chains[j][common]:
                return False
    return True


def _store_groups(activity, forms, writes, loaded, assumed):
    """Stores whose cotangents are all read when their block's reversal starts and zeroed
    when it ends (a read then a zero of one address wait for each other, and a read after
    a store the compiler cannot prove distinct waits too): several stores, in one block
    outside loops, of an array nothing reads and nothing else writes, at elements each
    thread owns and that differ by a constant index (out[e, 0], out[e, 1], ...)."""
    grouped: set = set()
    for array, ops in writes.items():
        if array == "arguments" or array in loaded or len(ops) < 2 \
                or array.type.space != "global" or not activity.is_active_array(array):
            continue
        if len({op.parent for op in ops}) != 1 or any(
                op.has_trait(ReadsMemory) or op.has_trait(Atomic) or in_loop(op)
                for op in ops):
            continue
        if not all(_distinct(a, b) for k, a in enumerate(ops) for b in ops[k + 1:]):
            continue
        owned = [forms.ownership(list(op.indices), "global") for op in ops]
        if None in owned:
            continue
        for found in owned:
            assumed = assumed.combine(LaunchAssumptions.owning(found))
        grouped.update(ops)
    return grouped, assumed


def _distinct(a: Operation, b: Operation) -> bool:
    """Whether two accesses provably reach different elements: one index is a different
    constant in each."""
    for x, y in zip(a.indices, b.indices):
        cx, cy = constant(x), constant(y)
        if cx is not None and cy is not None and cx != cy:
            return True
    return False


def constant(value: Value):
    if isinstance(value, BlockArgument) or not value.owner.has_trait(ConstantLike):
        return None
    return value.owner.value


def in_loop(op: Operation) -> bool:
    return any(a.has_trait(Loop) for a in op.ancestors())


def loop_trips(op: Operation) -> int | None:
    """The trip count of the loop `op` sits in directly, when it is a counted loop with
    constant bounds of at most MAX_BATCHED trips whose variable is one of `op`'s indices (so
    each iteration reaches another element)."""
    loop = op.parent.parent_op
    if loop is None or not loop.has_trait(CountedLoop) \
            or loop.regions[-1].block.args[0] not in list(op.indices):
        return None
    bounds = [constant(v) for v in (loop.lower, loop.upper, loop.step)]
    if None in bounds or bounds[2] <= 0:
        return None
    trips = max(0, -((bounds[0] - bounds[1]) // bounds[2]))
    return trips if 0 < trips <= MAX_BATCHED else None


def droppable_write(op: Operation) -> bool:
    """A write no other op reads the result of (a store; an atomic whose old value is unused)."""
    return (op.has_trait(WritesMemory) and not op.has_trait(Barrier) and not op.regions
            and not any(r.has_uses for r in op.results))
