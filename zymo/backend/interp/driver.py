"""The reference interpreter's driver: runs a kernel's IR over the threads of a launch.

Blocks run in batches of whole blocks. Every op of a region runs once for all threads of the
batch, on NumPy vectors with one entry per thread (uniform values may stay 0-d and broadcast).
The blocks of a batch thus run in lockstep, one of the schedules a GPU may pick; barriers,
shared memory and warps stay per block, so batching changes no result of a race-free kernel.
Divergence is a mask: a region runs with the mask of the threads that take it; side effects
(stores, atomics, barriers, votes) happen for those threads only, while the values computed
for masked-off threads are never kept. Each op is evaluated by its rule in the `INTERP` table
(written beside the op in `zymo/ops`); the `Interpreter` is the `ctx` those rules receive.
"""
from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...diagnostics import (Diagnostic, InternalError, KernelRuntimeError, LaunchError,
                            StepLimitError, WarpSyncError)
from ...ir.module import Module
from ...ir.operation import Operation, Region
from ...ir.traits import Aliases, Allocates, GridSync
from ...ops.control import waits_for_other_threads
from ...ops.foreign import linked_sources
from ...ir.types import Array
from ...ops.memory import SharedAlloc
from ...ops.registry import INTERP
from .. import host_c
from ..target import MAX_BLOCK_THREADS
from . import finished, memory, warps
from .memory import Buffer
from .races import GRID_EPOCH_SHIFT
from .threads import Batch

FULL_MASK = 0xFFFFFFFF

BATCH_THREADS = 1 << 18  # threads run together; bounds the size of every vector
BATCH_BYTES = 1 << 28    # shared and local memory of one batch
SHADOW_BYTES = 88        # the race detector's shadow of one element (see races.Shadow)


_settings = threading.local()


@contextlib.contextmanager
def settings(counts: dict | None = None, poison: int | None = None,
             max_ops: int | None = None):
    """Options for the launches this thread makes inside the block, through whatever launches
    them (a kernel's `[grid, block]`, a derivative's launch): `counts` gains for every op the
    number of threads that executed it (a dynamic profile); shared and local memory start as
    NaN floats and 0xA5 bytes, or, given `poison`, as that byte everywhere (two runs with
    different patterns tell whether results read memory that nothing wrote); past `max_ops`
    executed ops (summed over threads) a launch stops with `StepLimitError`."""
    saved = getattr(_settings, "values", {})
    _settings.values = {**saved, **{k: v for k, v in dict(
        counts=counts, poison=poison, max_ops=max_ops).items() if v is not None}}
    try:
        yield
    finally:
        _settings.values = saved


def run(module: Module, grid, block, args: Sequence[Any], shared_bytes: int = 0,
        check_races: bool = True, check_bounds: bool = True) -> None:
    """Launch `module.kernel` on `grid` x `block` threads; arrays in `args` change in place.

    Raises BoundsError, RaceError or KernelRuntimeError (naming the source line) when the
    kernel indexes out of bounds, races, or reaches a barrier divergently. See `settings` for
    profiles, other patterns of uninitialised memory, and limits.
    """
    block3 = _dim3(block, "block")
    if block3[0] * block3[1] * block3[2] > MAX_BLOCK_THREADS:
        raise LaunchError(f"a block has at most {MAX_BLOCK_THREADS} threads, not "
                          f"{block3[0] * block3[1] * block3[2]}")
    interpreter = Interpreter(module, _dim3(grid, "grid"), block3, shared_bytes, check_races,
                              check_bounds)
    values = getattr(_settings, "values", {})
    interpreter.counts = values.get("counts")
    interpreter.poison = values.get("poison")
    interpreter.ops_left = values.get("max_ops")
    with np.errstate(all="ignore"):  # integer arithmetic wraps, float errors give inf/NaN
        interpreter.launch(list(args))


def _body(func: Operation) -> Region:
    """The body region of a `func.func`."""
    return func.regions[0]


def _dim3(extent, what: str) -> tuple[int, int, int]:
    values = (extent,) if isinstance(extent, (int, np.integer)) else tuple(extent)
    if not 1 <= len(values) <= 3 or any(int(v) < 1 for v in values):
        raise LaunchError(f"{what} must be 1 to 3 positive integers, not {extent!r}")
    padded = [int(v) for v in values] + [1] * (3 - len(values))
    return padded[0], padded[1], padded[2]


class Interpreter:
    """The state of one launch, and the `ctx` that interp rules receive.

    What rules may use:
      mask                       bool vector, one entry per thread of the batch: the threads
                                 running the current region (the others' values are garbage)
      batch                      geometry (`threads.Batch`): `tid`, `ctaid`, `ntid`, `nctaid`
                                 (dicts by axis "x"/"y"/"z"), `laneid`, `n` threads
      run_region(region, args, mask) -> tuple | None
                                 run a region for the threads in `mask`; the values its
                                 terminator hands back, or None when `mask` has no thread
      call(name, args) -> tuple  run a function of the module for the current threads
      merge(cond, news, olds)    per running thread, `news` where `cond` holds, else `olds`
      load(op, array, indices), store(op, array, indices, value),
      atomic(op, array, indices, combine, operands)
                                 checked memory accesses of the active threads; `combine(old,
                                 *operands)` gives the new value (a ufunc when it can)
      shared_array(op), local_array(op), const_array(op)
                                 the Buffer an allocation op stands for
      shuffle(value, source_lane), ballot(predicate), equal_lanes(value)
                                 warp exchange (see `warps`)
      syncwarp(op, mask)         a warp's lanes wait for each other, checked
      barrier(op)                a block-wide barrier, checked for divergence
      block_count(predicate)     per thread, (threads of its block holding it, threads running)
      error(op, message, kind)   an exception naming the op's source location
    """

    def __init__(self, module: Module, grid, block, shared_bytes: int, check_races: bool,
                 check_bounds: bool):
        self.module = module
        self.grid = grid
        self.block = block
        self.shared_bytes = shared_bytes
        self.check_races = check_races
        self.check_bounds = check_bounds
        self._rules: dict[type, Any] = {}
        self._foreign: dict = {}          # ForeignFunction -> its ctypes function
        self._op_numbers: dict[Operation, int] = {}
        self._ops: list[Operation] = []
        self._constants: dict[Operation, Buffer] = {}
        self._finishing: dict[Region, bool] = {}
        self.counts: dict | None = None
        self.poison: int | None = None
        self.ops_left: int | None = None
        # the item sizes of the views the kernel takes: race shadows are placed finer than
        # that (a view of the real parts sees half of each complex element)
        self._view_grain = math.gcd(0, *(op.results[0].type.dtype.dtype.itemsize
                                          for op in module.walk() if op.has_trait(Aliases)))

    # ---- launch ------------------------------------------------------------------------
    def launch(self, args: list) -> None:
        kernel = self.module.kernel
        if kernel.attrs.get("kind") != "kernel":
            raise LaunchError(f"`{kernel.attrs.get('sym_name')}` is not a kernel")
        bound = self._bind(kernel, args)
        block_size = self.block[0] * self.block[1] * self.block[2]
        blocks = self.grid[0] * self.grid[1] * self.grid[2]
        per_batch = max(1, min(blocks, BATCH_THREADS // block_size,
                               BATCH_BYTES // max(1, self._bytes_per_block(block_size))))
        if self.module.any_op(GridSync):
            per_batch = blocks   # all blocks resident at once, as a cooperative launch
        elif any(waits_for_other_threads(op) for op in kernel.walk()):
            per_batch = 1   # blocks one after another: a block waiting for an earlier one runs

        for first in range(0, blocks, per_batch):
            self._run_batch(kernel, bound, first, min(per_batch, blocks - first))

    def _bind(self, kernel: Operation, args: list) -> list:
        types = kernel.attrs["function_type"].inputs
        names = list(kernel.attrs.get("arg_names") or ())
        names += [a.name_hint or f"argument {i}" for i, a in enumerate(_body(kernel).block.args)]
        if len(args) != len(types):
            raise LaunchError(f"the kernel takes {len(types)} arguments, {len(args)} given")
        bound: list = []
        arrays: list[int] = []   # positions of the array arguments
        for value, type_, name in zip(args, types, names):
            if isinstance(type_, Array):
                if (not isinstance(value, np.ndarray) or value.dtype != type_.dtype.dtype
                        or value.ndim != type_.ndim):
                    raise LaunchError(f"argument `{name}` must be a NumPy array of {type_}, "
                                      f"not {type(value).__name__} {getattr(value, 'dtype', '')}")
                arrays.append(len(bound))
                bound.append(value)
            else:
                bound.append(np.asarray(value, dtype=type_.dtype))
        # bound together, so that arguments sharing memory share its race shadow
        block_size = self.block[0] * self.block[1] * self.block[2]
        buffers = memory.arguments([bound[k] for k in arrays], [names[k] for k in arrays],
                                   block_size, self.check_races, self._view_grain)
        for k, buffer in zip(arrays, buffers):
            bound[k] = buffer
        return bound

    def _bytes_per_block(self, block_size: int) -> int:
        total = self.shared_bytes * (1 + SHADOW_BYTES)  # dynamic shared memory, at worst
        for op in self.module.walk():
            if not op.has_trait(Allocates) or not isinstance(op.results[0].type, Array):
                continue
            array = op.results[0].type
            elements = int(np.prod(array.shape or (0,)))
            size = elements * array.dtype.dtype.itemsize
            if array.space == "local":
                total += size * block_size
            elif array.space == "shared":
                total += size + elements * SHADOW_BYTES
        return total

    def _run_batch(self, kernel: Operation, bound: list, first: int, nblocks: int) -> None:
        self.batch = Batch(self.grid, self.block, first, nblocks)
        self.mask = np.ones(self.batch.n, bool)
        self._everyone = True
        self.live = np.ones(self.batch.n, bool)
        # barriers passed, per block of the batch; grid barriers in the high bits (races.py)
        self.epoch = np.zeros(nblocks, np.int64)
        self._thread_epoch: np.ndarray | None = None
        self.warp_epoch = np.zeros(len(self.batch.warp_first), np.int32)   # syncwarps passed
        self.env: dict = {}
        self._shared: dict[Operation, Buffer] = {}
        self._local: dict[Operation, Buffer] = {}
        self._dynamic: np.ndarray | None = None
        self._dynamic_shared: dict[np.dtype, Buffer] = {}  # by dtype, made together
        self.run_region(_body(kernel), bound, self.mask)

    # ---- evaluation --------------------------------------------------------------------
    def run_region(self, region: Region, args: Sequence, mask: np.ndarray) -> tuple | None:
        if not mask.any():
            return None
        saved = (self.mask, self._everyone, self.live)
        if self._others_finish(region):
            self.live = self.live & ~(self.mask & ~mask)
        self.mask, self._everyone = mask, bool(mask.all())
        try:
            env = self.env
            for arg, value in zip(region.block.args, args):
                env[arg] = value
            ops = region.block.ops
            for op in ops[:-1]:
                self._evaluate(op)
            return self._evaluate(ops[-1])  # the terminator hands back the region's values
        finally:
            self.mask, self._everyone, self.live = saved

    def _others_finish(self, region: Region) -> bool:
        known = self._finishing.get(region)
        if known is None:
            known = self._finishing[region] = finished.others_finish(region, self.module.kernel)
        return known

    def _evaluate(self, op: Operation):
        rule = self._rules.get(type(op))
        if rule is None:
            rule = self._rules[type(op)] = self._find_rule(op)
        env = self.env
        if self.counts is not None or self.ops_left is not None:
            self._tally(op)
        try:
            out = rule(self, op, *[env[value] for value in op.operands])
        except KernelRuntimeError:
            raise
        except Exception as error:
            if not getattr(error, "_zymo_noted", False):
                error.add_note(f"while interpreting {op.name} at {op.loc}")
                error._zymo_noted = True  # type: ignore[attr-defined]
            raise
        results = op.results
        if results:
            if isinstance(out, tuple):
                for result, value in zip(results, out):
                    env[result] = value
            else:
                env[results[0]] = out
        return out

    def _tally(self, op: Operation) -> None:
        threads = int(np.count_nonzero(self.mask))
        if self.counts is not None:
            self.counts[op] = self.counts.get(op, 0) + threads
        if self.ops_left is not None:
            self.ops_left -= threads
            if self.ops_left < 0:
                raise StepLimitError(f"{op.loc}: the kernel ran past its limit of executed ops "
                                     f"on the interpreter (a loop that runs far longer than "
                                     f"it should, or forever)")

    def _find_rule(self, op: Operation):
        rule = INTERP.find(type(op))
        if rule is None:
            reason = INTERP.absence_reason(type(op))
            raise InternalError(f"{op.loc}: the interpreter has no rule for `{op.name}`"
                                + (f" ({reason})" if reason else ""))
        return rule

    def call(self, name: str, args: Sequence) -> tuple:
        callee = self.module.functions.get(name)
        if callee is None:
            raise InternalError(f"a call of `{name}`, which the module does not hold "
                                f"(it has {', '.join(self.module.functions)})")
        caller_env, self.env = self.env, {}  # a frame of its own, so recursion is safe
        try:
            result = self.run_region(_body(callee), args, self.mask)
        finally:
            self.env = caller_env
        return () if result is None else result

    def foreign_function(self, callee, loc):
        """A ctypes function for foreign device function `callee`, compiled for the host with
        the module's other sources (backend/host_c.py)."""
        found = self._foreign.get(callee)
        if found is None:
            library = host_c.library(linked_sources(self.module), loc)
            found = self._foreign[callee] = library.function(callee, loc)
        return found

    def foreign_pointer(self, buffer: Buffer, op: Operation) -> int:
        """The address of an argument array's first element, for a foreign function."""
        if buffer.per or not buffer.data.flags.c_contiguous:
            raise self.error(op, f"the interpreter passes foreign functions pointers to "
                             f"argument arrays only, not to {buffer.name}", LaunchError)
        return buffer.data.ctypes.data

    def merge(self, cond, news: Sequence, olds: Sequence) -> tuple:
        """Per running thread, the `news` where `cond` holds and the `olds` elsewhere. When
        every running thread takes the new values they are returned as they are, so uniform
        (0-d) values stay uniform through loops."""
        taken = np.asarray(cond, bool)
        if not (self.mask & ~taken).any():
            return tuple(news)
        return tuple(self._select(taken, new, old) for new, old in zip(news, olds))

    def _select(self, taken: np.ndarray, new, old):
        if new is old:
            return new
        if isinstance(new, Buffer) or isinstance(old, Buffer):
            if not (self.mask & taken).any():
                return old
            raise KernelRuntimeError("the interpreter cannot pick an array per thread")
        return np.where(taken, new, old)

    def everyone_active(self) -> bool:
        """Whether every thread of the batch runs the current region (a common fast path)."""
        return self._everyone

    # ---- diagnostics -------------------------------------------------------------------
    def error(self, op: Operation, message: str, kind: type = KernelRuntimeError) -> Exception:
        return kind(Diagnostic(op.loc, message).format())

    def op_number(self, op: Operation) -> int:
        """A small number standing for `op` in the race detector's shadow memory."""
        number = self._op_numbers.get(op)
        if number is None:
            number = self._op_numbers[op] = len(self._ops)
            self._ops.append(op)
        return number

    def op_by_number(self, number: int) -> Operation:
        return self._ops[number]

    # ---- memory ------------------------------------------------------------------------
    def load(self, op, array: Buffer, indices):
        return memory.load(self, op, array, indices)

    def store(self, op, array: Buffer, indices, value) -> None:
        memory.store(self, op, array, indices, value)

    def atomic(self, op, array: Buffer, indices, combine, operands):
        return memory.atomic(self, op, array, indices, combine, operands)

    def view_array(self, op, base: Buffer, make) -> Buffer:
        """A view of `base` (ops/views.py): `make(data, lead)` views its NumPy data."""
        name = op.result.name_hint or base.name
        return memory.view(self, op, base, make, name)

    def translated_view(self, op, base: Buffer, shape: tuple, translate) -> Buffer:
        """A view of `base` whose position or shape differs between threads (ops/views.py):
        extents per axis, `translate(indices)` the indices of `base` they denote."""
        return memory.translated(base, shape, translate, op.result.name_hint or base.name)

    def uniform_ints(self, values) -> list[int] | None:
        """`values` as Python ints where each is the same in every running thread, else
        None."""
        found = []
        for value in values:
            value = np.asarray(value)
            if value.ndim:
                running = value[self.mask] if value.shape == self.mask.shape else value
                if running.size and (running != running.flat[0]).any():
                    return None
                value = running.flat[0] if running.size else value.flat[0]
            found.append(int(value))
        return found

    def thread_epoch(self) -> np.ndarray:
        """The barrier epoch of each thread's block."""
        if self._thread_epoch is None:
            self._thread_epoch = self.epoch[self.batch.block_in_batch]
        return self._thread_epoch

    def thread_warp_epoch(self) -> np.ndarray:
        """The syncwarp epoch of each thread's warp."""
        return self.warp_epoch[self.batch.warp_of]

    def shared_array(self, op) -> Buffer:
        buffer = self._shared.get(op)
        if buffer is None:
            dtype = op.dtype.dtype
            name = op.result.name_hint or f"shared array at {op.loc}"
            if tuple(op.shape) == (0,):  # numba's dynamic shared memory, sized at launch
                if dtype not in self._dynamic_shared:
                    self._view_dynamic_shared(dtype, name)
                buffer = self._dynamic_shared[dtype]
            else:
                buffer = memory.shared(tuple(op.shape), dtype, self.batch.nblocks, name,
                                       self.batch.block_size, self.check_races, self.poison,
                                       self._view_grain)
            self._shared[op] = buffer
        return buffer

    def _view_dynamic_shared(self, dtype: np.dtype, name: str) -> None:
        """The views of dynamic shared memory as every dtype the kernel takes it as, made at
        once so that the race detector sees their bytes overlap."""
        views: dict[np.dtype, str] = {}
        for op in self.module.walk():
            if isinstance(op, SharedAlloc) and tuple(op.shape) == (0,):
                views.setdefault(op.dtype.dtype,
                                 op.result.name_hint or f"shared array at {op.loc}")
        views.setdefault(dtype, name)   # in case the walk missed it
        buffers = memory.dynamic_shared(self._dynamic_bytes(), list(views), list(views.values()),
                                        self.batch.block_size, self.check_races,
                                        self._view_grain)
        self._dynamic_shared.update(zip(views, buffers))

    def _dynamic_bytes(self) -> np.ndarray:
        """The dynamic shared memory of each block: every array of size 0 starts there."""
        if self._dynamic is None:
            self._dynamic = np.full((self.batch.nblocks, self.shared_bytes),
                                    0xFF if self.poison is None else self.poison, np.uint8)
        return self._dynamic

    def local_array(self, op) -> Buffer:
        buffer = self._local.get(op)
        if buffer is None:
            name = op.result.name_hint or f"local array at {op.loc}"
            buffer = memory.local(tuple(op.shape), op.dtype.dtype, self.batch.n, name,
                                  self.poison)
            self._local[op] = buffer
        return buffer

    def const_array(self, op) -> Buffer:
        buffer = self._constants.get(op)
        if buffer is None:
            name = op.result.name_hint or f"constant array at {op.loc}"
            buffer = self._constants[op] = memory.constant(np.asarray(op.data), name)
        return buffer

    # ---- synchronization and warps -----------------------------------------------------
    def barrier(self, op) -> None:
        """All live threads of a block must arrive together; each arriving block's epoch
        advances, which orders its threads' accesses for the race detector."""
        shape = (self.batch.nblocks, self.batch.block_size)
        here = self.mask.reshape(shape)
        arrived = np.any(here, axis=1, keepdims=True)
        missing = self.live.reshape(shape) & ~here & arrived
        if missing.any():
            block, thread = (int(k) for k in np.argwhere(missing)[0])
            present = int(np.argmax(here[block]))
            first = (self.batch.first_block + block) * self.batch.block_size
            raise self.error(op, "divergent barrier: "
                             f"{self.batch.describe(first + present)} reached it but "
                             f"{self.batch.describe(first + thread)} did not; every "
                             "thread of a block must reach each barrier")
        self.epoch[arrived[:, 0]] += 1
        self._thread_epoch = None

    def block_count(self, predicate) -> tuple[np.ndarray, np.ndarray]:
        """Per thread, how many running threads of its block hold `predicate`, and how many
        run (a block vote's reduction, after its barrier)."""
        block = self.batch.block_in_batch
        holds = self.mask & np.broadcast_to(np.asarray(predicate, bool), self.mask.shape)
        nblocks = self.batch.nblocks
        count = np.bincount(block, weights=holds, minlength=nblocks).astype(np.int64)
        present = np.bincount(block, weights=self.mask, minlength=nblocks).astype(np.int64)
        return count[block], present[block]

    def grid_barrier(self, op) -> None:
        """All live threads of the launch (one batch: see `launch`) must arrive together;
        every block then starts a new grid epoch, which orders accesses across blocks."""
        missing = self.live & ~self.mask
        if missing.any() and self.mask.any():
            thread = int(np.argmax(missing))
            present = int(np.argmax(self.mask))
            raise self.error(op, "divergent grid sync: "
                             f"{self.batch.describe(int(self.batch.global_id[present]))} reached "
                             f"it but {self.batch.describe(int(self.batch.global_id[thread]))} "
                             "did not; every thread of the launch must reach each grid.sync()")
        self.epoch[:] = ((int(self.epoch.max()) >> GRID_EPOCH_SHIFT) + 1) << GRID_EPOCH_SHIFT
        self._thread_epoch = None

    def shuffle(self, op, mask, value, source_lane):
        self.warp_sync(op, mask, source_lane)
        return warps.shuffle(self.batch, value, source_lane)

    def warp_sync(self, op, mask, source_lane=None) -> None:
        """Stops a `*_sync` call whose result CUDA leaves undefined (a GPU may still give the
        expected value, so a test passing there proves nothing)."""
        if self._everyone and np.ndim(mask) == 0 and int(mask) == FULL_MASK:
            return
        found = warps.undefined_call(self.batch, self.mask, self.live, mask, source_lane)
        if found is not None:
            thread, why = found
            raise self.error(op, f"{op.name} with an undefined result in "
                             f"{self.batch.describe(int(self.batch.global_id[thread]))}: {why}; "
                             "pass the mask of exactly the lanes that make the call (all of "
                             "them reach it), e.g. zm.activemask()", WarpSyncError)

    def syncwarp(self, op, mask) -> None:
        """`warp.sync`: checked as every `*_sync` call is; each warp making it advances its
        warp epoch, which orders its lanes' accesses for the race detector."""
        self.warp_sync(op, mask)
        self.warp_epoch[np.unique(self.batch.warp_of[self.mask])] += 1

    def ballot(self, predicate) -> np.ndarray:
        return warps.ballot(self.batch, self.mask, predicate)

    def equal_lanes(self, value) -> np.ndarray:
        """Per thread, the u32 mask of the running lanes of its warp whose `value` has the
        same bits as its own."""
        return warps.equal_lanes(self.batch, self.mask, value)

    def vote(self, op, mask, predicate) -> np.ndarray:
        """The ballot of `predicate` over the lanes of `mask`."""
        self.warp_sync(op, mask)
        return self.ballot(predicate) & mask
