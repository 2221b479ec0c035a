"""`zm.grad(kernel, max_registers="auto")`: a derivative's register cap picked on the GPU at its
first launch, by timing the candidate caps.

A reverse-mode derivative's best cap differs by kernel: on an H200 RSBench's gradient runs at
10.6x its primal under 255 registers and 6.6x under 128 (occupancy-bound), while DG and LBM
prefer 255 (bench/results/enzyme-registers-h200.md). At the first launch of a derivative
signature (activities, argument types, variant) with a given grid, block and shared memory on
a device, `Autotuner.resolve`

1. builds the derivative under each cap of CANDIDATES, largest first. The builds share
   everything but the machine code: the IR is the signature's, and the PTX differs by the
   `.maxnreg` line alone, so each further cap costs nvJitLink, not LLVM
   (`cache.recapped`). A cap at or above the registers the last build used would give that
   same build and is skipped: a derivative that needs 100 registers is built once, not timed.
   A build that cannot run the launch's block (too many registers for its threads, or for a
   cooperative grid) is left out;
2. times the builds with CUDA events on the launch's stream, in alternation, on scratch
   copies of every array the derivative may write (shadows, written primals, the Active
   scalars' adjoints: by its own IR), restored from the launch's arrays before each timed
   launch, as Triton's autotuner does with `restore_value`. The launch's own arrays are only
   read while tuning: they see exactly one launch, the real one. One untimed launch of each
   build, then up to TIMING_ROUNDS rounds within TIMING_BUDGET seconds of GPU time (a slow
   derivative is timed once), the median of each;
3. remembers the fastest for that key (later launches pay a dict lookup), and records what
   it measured in `GradKernel.tuning`.

A launch inside a CUDA stream capture is not tuned: timing would need to wait for the GPU,
which a capture forbids, and the tuning launches would join the graph. It runs the largest
candidate and remembers nothing, so the first launch outside a capture tunes. A launch on a
user stream is tuned on that stream. Global tapes are not copied: a derivative writes each
slot of its tape before it reads it, and the real launch writes it again.
"""
from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..ops.foreign import linked_sources
from .derivative import run_with_consumer

# the caps tried, largest first: the largest is zm.grad's default (DERIVATIVE_REGISTERS)
CANDIDATES = (255, 168, 128)
# GPU seconds of timed launches after which tuning stops (each build timed at least once)
TIMING_BUDGET = 0.2
# the most timed launches of each build
TIMING_ROUNDS = 7


@dataclass
class Tuning:
    """What one tuning measured: the caps built and the registers their builds use, those
    skipped and why, the median milliseconds of those timed, and the cap chosen."""

    signature: str
    grid: tuple
    block: tuple
    chosen: int
    registers: dict = field(default_factory=dict)   # cap -> registers of its build
    skipped: dict = field(default_factory=dict)     # cap -> why it was not timed
    times: dict = field(default_factory=dict)       # cap -> median ms
    note: str = ""                                  # why nothing was timed, if so

    def summary(self) -> str:
        """One line: `grad(k)(...) grid (..) block (..): chose 168; 255: 3.1 ms (200
        registers), 168: 2.2 ms (168 registers); 128 not timed: ...`."""
        built = ", ".join(f"{cap}: {self.times[cap]:.3f} ms ({self.registers[cap]} registers)"
                          if cap in self.times else f"{cap}: {self.registers[cap]} registers"
                          for cap in sorted(self.registers, reverse=True))
        skipped = "".join(f"; {cap} not timed: {why}" for cap, why in self.skipped.items())
        note = f"; {self.note}" if self.note else ""
        return (f"{self.signature} grid {self.grid} block {self.block}: chose {self.chosen}; "
                f"{built or 'nothing built'}{skipped}{note}")


def choose(candidates, build: Callable, registers: Callable, measure: Callable,
           unlaunchable: Callable = lambda built: None) -> tuple[int, dict, dict, dict]:
    """(chosen cap, registers, skipped, times) over `candidates` (largest first):
    `build(cap)` makes a build, `registers(built)` says how many registers it uses,
    `unlaunchable(built)` why it cannot run the launch (None: it can), and
    `measure({cap: built})` times those left, {cap: ms}. A cap at or above the registers of
    the last build made would give that build again: it is skipped without building. With one
    build left nothing is timed. The fastest wins; a tie goes to the larger cap."""
    built, used, skipped = {}, {}, {}
    last = None
    for cap in sorted(set(candidates), reverse=True):
        if last is not None and cap >= used[last]:
            skipped[cap] = f"the build of cap {last} ({used[last]} registers)"
            continue
        made = build(cap)
        used[cap] = registers(made)
        last = cap
        why = unlaunchable(made)
        if why:
            skipped[cap] = why
        else:
            built[cap] = made
    if not built:   # none runs this block: the largest, whose launch says why
        return max(candidates), used, skipped, {}
    if len(built) == 1:
        return next(iter(built)), used, skipped, {}
    times = measure(built)
    return fastest(times), used, skipped, times


def fastest(times: dict) -> int:
    """The cap of the least time; of equal times the larger cap."""
    return min(times, key=lambda cap: (times[cap], -cap))


def rounds_within(estimates_ms, budget_ms: float, most: int) -> int:
    """Rounds of timed launches (one of each build) that fit `budget_ms`, from a first
    estimate of each build's time: at least one, at most `most`."""
    per_round = sum(estimates_ms)
    if per_round <= 0:
        return most
    return int(max(1, min(most, budget_ms // per_round)))


class Autotuner:
    """The caps chosen for one `zm.grad(kernel, max_registers="auto")` (shared by its views),
    by (signature, grid, block, shared bytes, device)."""

    def __init__(self, candidates=None):
        self.candidates = tuple(sorted(set(candidates or CANDIDATES), reverse=True))
        self.chosen: dict = {}       # key -> the specialization launches run
        self.records: dict = {}      # readable key -> Tuning
        self._lock = threading.Lock()

    def forget(self) -> None:
        """Drop every choice and record: each signature is tuned again at its next launch."""
        with self._lock:
            self.chosen.clear()
            self.records.clear()

    def resolve(self, spec, backend: str, grid, block, args: list, shared: int, stream):
        """The specialization a launch of `spec` with `args` runs: `spec` itself off the GPU
        (a CPU or interpreter build has no register cap), else that of the fastest cap,
        found at the first such launch (see the module's docstring)."""
        if backend != "cuda":
            return spec
        from .cuda import driver
        key = (spec, grid, block, shared, driver.current_device().ordinal)
        found = self.chosen.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self.chosen.get(key)
            if found is None:
                if capturing(stream):
                    return spec
                found = self.chosen[key] = self._tune(spec, grid, block, args, shared, stream)
        return found

    def _tune(self, spec, grid, block, args: list, shared: int, stream):
        from .cuda import driver
        device = driver.current_device()
        base = spec.kernel.max_registers
        record = Tuning(describe(spec), grid, block, base)
        name = f"{record.signature} grid={grid} block={block}" + \
            (f" shared={shared}" if shared else "")
        scratch = Scratch.of(spec, args)
        if isinstance(scratch, str):
            record.note = scratch
            self.records[name] = record
            return spec
        threads, blocks = int(np.prod(block)), int(np.prod(grid))
        builds = {base: spec}

        def build(cap):
            if cap not in builds:
                builds[cap] = capped_specialization(spec, cap)
            return builds[cap]

        def function(built):
            return built.compiled("cuda").function(device)

        def unlaunchable(built):
            most = driver.function_attribute(function(built), "MAX_THREADS_PER_BLOCK")
            if threads > most:
                return f"at most {most} threads per block"
            if built.compiled("cuda").cooperative and blocks > driver.max_resident_blocks(
                    function(built), device, threads, shared):
                return "too few resident blocks for the cooperative grid"
            return None

        def measure(built: dict) -> dict:
            runs = {cap: (lambda s=s: run_with_consumer(s, "cuda", grid, block, scratch.args,
                                                         shared, stream))
                    for cap, s in built.items()}
            return time_on_gpu(runs, lambda: scratch.restore(stream), stream)

        record.chosen, record.registers, record.skipped, record.times = choose(
            self.candidates, build,
            lambda built: driver.function_attribute(function(built), "NUM_REGS"),
            measure, unlaunchable)
        self.records[name] = record
        return builds[record.chosen]


def describe(spec) -> str:
    """A derivative signature for people: `grad(name)(dup array<f32, 1>, active f32)`."""
    arguments = ", ".join(f"{kind} {param}" for kind, param in zip(spec.kinds,
                                                                    spec.primal.params))
    variant = "plain" if spec.plain_updates else "atomic"
    overlap = "" if spec.noalias else ", overlapping"
    return f"grad({spec.kernel.__name__})({arguments}) [{variant}{overlap}]"


def capped_specialization(spec, cap: int):
    """`spec` under register cap `cap`: its IR and what the launch reads of it (tapes,
    assumptions, the consuming kernel) shared, its CUDA program made from `spec`'s PTX."""
    from .cuda import cache
    from .kernel import with_max_registers
    out = copy.copy(spec)
    out.kernel = with_max_registers(spec.kernel, cap)
    out.results = {name: spec.results[name] for name in spec.steps if name in spec.results}
    out.timings = {}
    program = cache.recapped(spec.compiled("cuda"), cap, linked_sources(spec.codegen))
    if program is not None:   # else compiled from the shared IR, LLVM included
        out.results["cuda"] = program
    return out


class Scratch:
    """A launch's arguments for tuning: every array the derivative may write replaced by a
    GPU copy restored from the launch's own before each timed launch; host arrays uploaded
    once."""

    def __init__(self, args: list, pairs: list):
        self.args, self.pairs = args, pairs   # pairs: (scratch DeviceArray, source address)

    @classmethod
    def of(cls, spec, args: list):
        """The scratch arguments of a launch of `spec`, or why there are none (a string)."""
        from .cuda.arrays import DeviceArray, array_info, to_device
        from .cuda.driver import CudaError
        written = cls.positions(spec)
        out, pairs, made = list(args), [], {}
        try:
            for k, value in enumerate(args):
                if isinstance(value, np.ndarray) and \
                        not hasattr(value, "__cuda_array_interface__"):
                    value = out[k] = to_device(value)   # as each launch would, but once
                if k not in written:
                    continue
                info = array_info(value)
                if info is None or not info.contiguous:
                    return (f"argument {k} is written and is not a contiguous GPU array: "
                            f"not tuned")
                where = (info.data, tuple(info.shape), info.dtype)
                if where not in made:   # one array passed twice stays one
                    made[where] = DeviceArray(info.shape, info.dtype)
                    pairs.append((made[where], info.data))
                out[k] = made[where]
        except CudaError as error:   # out of memory for the copies: the default cap
            return f"no memory for scratch copies ({error}): not tuned"
        return cls(out, pairs)

    @staticmethod
    def positions(spec) -> set:
        """The arguments a launch of `spec` may write (the consuming kernel's included) but
        its global tapes, each slot of which the derivative writes before it reads it."""
        written = set(spec.array_uses()[0])
        if spec.consume is not None:
            written |= spec.consume.array_uses()[0]
        return written - set(range(len(spec.params) - len(spec.tapes), len(spec.params)))

    def restore(self, stream) -> None:
        from .cuda.driver import bindings, call
        from .cuda.streams import as_stream
        handle = as_stream(stream)
        for copy_, source in self.pairs:
            if copy_.nbytes:
                call(bindings().cuMemcpyDtoDAsync, copy_.data, source, copy_.nbytes, handle,
                     name="cuMemcpyDtoDAsync")


def time_on_gpu(runs: dict, restore: Callable, stream, budget: float = TIMING_BUDGET,
                most: int = TIMING_ROUNDS) -> dict:
    """Median milliseconds of each of `runs` ({cap: launch}) on `stream`, each timed launch
    after `restore()` (outside its events): one untimed round, whose times say how many
    rounds fit `budget` seconds, then those rounds in alternation, queued back to back so
    that the GPU does not wait for the host between launches."""
    from .cuda.streams import Event

    def timed(run):
        restore()
        start = Event().record(stream)
        run()
        return start, Event().record(stream)

    first = {cap: timed(run) for cap, run in runs.items()}
    estimates = []
    for start, end in first.values():
        end.synchronize()
        estimates.append(end.elapsed_ms(start))
    rounds = rounds_within(estimates, budget * 1e3, most)
    queued = [{cap: timed(run) for cap, run in runs.items()} for _ in range(rounds)]
    samples: dict = {cap: [] for cap in runs}
    for events in queued:
        for cap, (start, end) in events.items():
            end.synchronize()
            samples[cap].append(end.elapsed_ms(start))
    return {cap: float(np.median(values)) for cap, values in samples.items()}


def capturing(stream) -> bool:
    """Whether `stream` is being captured into a CUDA graph (or cannot be asked: the legacy
    stream while another stream captures)."""
    from .cuda.driver import CudaError, bindings, call
    from .cuda.streams import as_stream
    drv = bindings()
    try:
        status = call(drv.cuStreamIsCapturing, as_stream(stream), name="cuStreamIsCapturing")
    except CudaError:
        return True
    return int(status) != int(drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)
