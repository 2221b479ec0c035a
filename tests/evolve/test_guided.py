"""Profile-guided mutation: the interpreter's op counts, heat by op id, and a Mutator that edits
hot ops and hoists them out of the loops around them, while GEVO's uniform choice stays the
default without a profile."""
import collections
import concurrent.futures

import numpy as np

import zymo as zm
from zymo.backend import interp
from zymo.genome import Move, Mutator, replay
from zymo.genome.mutate import op_heat, original_id
from zymo.runtime.evolution import heat
from zymo.runtime.evolution.variant import VariantKernel, base_ir
from zymo.runtime.kernel import param_of_arg

STEPS = 6
WIDTH = 64


@zm.kernel
def step_clears(x, out):
    buf = zm.shared.array(WIDTH, zm.f32)
    t = zm.threadIdx.x
    acc = 0.0
    for s in range(STEPS):
        # every thread clears the whole buffer on every step: hot, and needed only once
        for k in range(WIDTH):
            buf[k] = 0.0
        zm.syncthreads()
        if t % 2 == 0:
            buf[t] = x[t] * (s + 1)
        zm.syncthreads()
        acc += buf[t] + buf[(t + 1) % WIDTH]
        zm.syncthreads()
    out[t] = acc


def step_inputs(rng):
    return [rng.standard_normal(WIDTH).astype(np.float32), np.zeros(WIDTH, np.float32)]


def expected(args):
    x = args[0]
    even = np.where(np.arange(WIDTH) % 2 == 0, x, 0.0)
    per_step = even + np.roll(even, -1)
    return sum(per_step * (s + 1) for s in range(STEPS)).astype(np.float32)


def base_and_heat():
    args = step_inputs(np.random.default_rng(0))
    params = tuple(param_of_arg(a) for a in args)
    base = base_ir(step_clears, params)
    return base, heat.profile(step_clears, step_inputs, (1, WIDTH), 0)


def loop_ops(base):
    """(the step loop, the clearing loop inside it)"""
    loops = [op for op in base.kernel.walk() if op.name == "control.for"]
    outer = next(op for op in loops if any(inner in loops for inner in op.walk()
                                           if inner is not op))
    inner = next(op for op in outer.walk() if op is not outer and op.name == "control.for")
    return outer, inner


def test_interpreter_counts_the_threads_that_run_each_op():
    @zm.kernel
    def branchy(x, out):
        t = zm.threadIdx.x
        if t < 10:
            for k in range(3):
                out[t] += x[t]
        else:
            out[t] = 0.0

    args = [np.ones(32, np.float32), np.zeros(32, np.float32)]
    params = tuple(param_of_arg(a) for a in args)
    module = base_ir(branchy, params)
    counts: dict = {}
    with interp.settings(counts=counts):
        interp.run(module, 1, 32, args)
    stores = sorted(count for op, count in counts.items() if op.name == "memory.store")
    assert stores == [22, 30]            # 22 threads store 0; 10 threads store 3 times
    by_id = op_heat(counts)
    loop = next(op for op in module.kernel.walk() if op.name == "control.for")
    assert by_id[loop.id] == 10 + 30     # entered by 10 threads, 3 iterations each
    np.testing.assert_array_equal(args[1][:10], 3.0)


def test_variant_ids_map_to_the_ops_they_copy():
    assert original_id("12:8") == "12:8"
    assert original_id("12:8@e4@e9") == "12:8"
    assert original_id("12:8.1~e3~i32=0") == "12:8.1"


def test_guided_mutations_edit_the_hot_loop_and_hoist_it():
    base, hot = base_and_heat()
    outer, inner = loop_ops(base)
    # the clearing loop's ops, and those setting its bounds (as hot: they set its trip count)
    clearing = ({op.id for op in inner.walk()} - {inner.regions[0].block.ops[-1].id}) | \
        {value.owner.id for value in inner.operands if hasattr(value, "owner")}
    tallies = {}
    for name, mutator in (("uniform", Mutator(base)), ("guided", Mutator(base, heat=hot))):
        rng = np.random.default_rng(7)
        tally = collections.Counter()
        for n in range(1000):
            edit = mutator.mutate([], rng, f"e{n}")
            tally["clearing"] += edit.names()[0] in clearing
            tally["hoist"] += isinstance(edit, Move) and edit.source == inner.id \
                and edit.before == outer.id
        tallies[name] = tally
    assert tallies["guided"]["clearing"] > 0.5 * 1000 > 3 * tallies["uniform"]["clearing"]
    assert tallies["guided"]["hoist"] >= 8 > tallies["uniform"]["hoist"]


def test_the_hoisted_variant_is_right_and_runs_fewer_ops():
    base, hot = base_and_heat()
    outer, inner = loop_ops(base)
    hoisted = replay(base, [Move("h", inner.id, outer.id)]).module
    counts: dict = {}
    args = step_inputs(np.random.default_rng(3))
    with interp.settings(counts=counts):
        interp.run(hoisted, 1, WIDTH, args)
    np.testing.assert_allclose(args[1], expected(args), rtol=1e-5)
    assert sum(counts.values()) < 0.3 * sum(hot[op.id] for op in base.kernel.walk()
                                            if op.id in hot and not op.regions)


def test_evolve_guided_by_a_profile_finds_the_hoist():
    with concurrent.futures.ThreadPoolExecutor(2) as threads:
        result = zm.evolve(step_clears, (1, WIDTH), step_inputs, population=16,
                           generations=6, seed=1, backend="interp", executor=threads,
                           profile=step_inputs, kinds=("move", "delete"), progress=False)
    args = step_inputs(np.random.default_rng(11))
    VariantKernel(step_clears, result.edits).on("interp")[1, WIDTH](*args)
    np.testing.assert_allclose(args[1], expected(args), rtol=1e-5)
    assert result.speedup > 2.0, result.report()


def test_a_kernel_the_interpreter_cannot_profile_is_searched_uniformly():
    def broken(rng):
        raise ValueError("no inputs here")

    messages = []

    class Stream:
        def write(self, text):
            messages.append(text)

        def flush(self):
            pass

    with concurrent.futures.ThreadPoolExecutor(2) as threads:
        zm.evolve(step_clears, (1, WIDTH), step_inputs, population=4, generations=1,
                  backend="interp", executor=threads, profile=broken, progress=Stream())
    assert any("no profile" in m and "uniformly" in m for m in messages)


def test_interpreter_can_start_memory_from_a_second_pattern():
    @zm.kernel
    def reads_uncleared(out):
        buf = zm.shared.array(32, zm.i32)
        t = zm.threadIdx.x
        if t % 2 == 0:
            buf[t] = t
        zm.syncthreads()
        out[t] = max(buf[t], 0)      # odd entries were never written

    outs = []
    for poison in (None, 0x5A):
        out = np.zeros(32, np.int32)
        module = base_ir(reads_uncleared, (param_of_arg(out),))
        with interp.settings(poison=poison):
            interp.run(module, 1, 32, [out])
        outs.append(out)
    np.testing.assert_array_equal(outs[0][::2], np.arange(0, 32, 2))
    np.testing.assert_array_equal(outs[0][1::2], 0)            # 0xA5A5A5A5 is negative
    np.testing.assert_array_equal(outs[1][1::2], 0x5A5A5A5A)   # 0x5A5A5A5A is not


@zm.kernel
def sums(x, out, n, big):
    t = zm.threadIdx.x
    acc = 0.0
    for k in range(n):
        acc += x[t]
    out[t] = acc if big > 0 else 0.0


def sums_inputs(rng):
    return [rng.standard_normal(32).astype(np.float32), np.zeros(32, np.float32), 4,
            2_000_000_000]


def test_a_variant_that_loops_far_longer_is_stopped_on_the_interpreter():
    # the race check's interpreter run has no worker time limit behind it in a thread pool:
    # a variant may execute 5 times the ops of the original, then fails
    from zymo.genome import Operand
    from zymo.genome.ids import ref_of
    from zymo.runtime.evolution.screening import interpreted
    from zymo.runtime.evolution.validation import Task, outcome
    base = base_ir(sums, tuple(param_of_arg(a) for a in sums_inputs(np.random.default_rng(0))))
    n, big = base.kernel.regions[0].block.args[2:4]
    trip = next(op for op in base.kernel.walk() if op.operands and op.operands[0] is n)
    longer = Operand("z", trip.id, 0, ref_of(big))            # range(big)
    verdict = interpreted(Task(sums, (longer,), sums_inputs, None, (1, 32), 0, "interp"))
    assert not verdict.valid and outcome(verdict) == "hang (time limit)", verdict.reason
    assert verdict.reason.startswith("StepLimitError") and verdict.seconds < 30


@zm.kernel
def rescale_by_norm(x, w, out):
    """out = x * |w|^2, the norm recomputed for every element a thread handles."""
    i = zm.grid(1)
    for e in range(4):
        j = i * 4 + e
        s = 0.0
        for k in range(8):
            s += w[k] * w[k]
        out[j] = x[j] * s


def test_a_hoisting_move_keeps_the_moved_value_feeding_its_uses():
    args = [np.arange(32, dtype=np.float32), np.linspace(0.1, 0.8, 8).astype(np.float32),
            np.zeros(32, np.float32)]
    base = base_ir(rescale_by_norm, [param_of_arg(a) for a in args])
    outer, inner = [op for op in base.kernel.walk() if op.regions and op.name == "control.for"]
    moves = [Mutator(base, ("move",)).mutate([], np.random.default_rng(seed), f"m{seed}")
             for seed in range(400)]
    hoists = [m for m in moves if m.source == inner.id and m.before == outer.id]
    assert hoists
    for move in hoists:
        # the hoisted norm is what `x[j] * s` reads, not some other value in scope
        assert [f.value for f in move.fills] == [("r", f"{inner.id}@{move.tag}", 0)]
    # its operands are all in scope above the outer loop: nothing to repair, and it is right
    assert hoists[0].rewires == ()
    got = [a.copy() for a in args]
    interp.run(replay(base, [hoists[0]]).module, 1, 8, got)
    w = args[1].astype(np.float64)
    np.testing.assert_allclose(got[2], args[0] * (w @ w), rtol=1e-5)
