"""The compiled launchers (runtime/cuda/native.py), run on the CPU against a stand-in for
cuLaunchKernel that records what it was given: every slot must hold the bytes that
`struct.pack` of the plan's slot format writes, and the configuration must arrive unchanged."""
from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zymo as zm
from zymo.frontend import Param
from zymo.ir.types import Array
from zymo.runtime.cuda import driver, launch, native

_PROTOTYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, *[ctypes.c_uint32] * 7,
                              ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)


class FakeDriver:
    """A cuLaunchKernel that copies out its arguments and returns `result`."""

    def __init__(self, slot_count: int, result: int = 0):
        self.calls: list = []
        self.result = result

        def record(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            slots = [ctypes.string_at(params[k], 8) for k in range(slot_count)] if params \
                else None
            self.calls.append((function, (gx, gy, gz), (bx, by, bz), shared, stream, slots,
                               extra))
            return self.result

        self.callback = _PROTOTYPE(record)   # kept alive as long as the fake
        self.address = ctypes.cast(self.callback, ctypes.c_void_p).value


_VALUES = {
    "u64": st.integers(0, 2**64 - 1), "i64": st.integers(-2**63, 2**63 - 1),
    "i32": st.integers(-2**31, 2**31 - 1), "u32": st.integers(0, 2**32 - 1),
    "i16": st.integers(-2**15, 2**15 - 1), "u16": st.integers(0, 2**16 - 1),
    "i8": st.integers(-128, 127), "u8": st.integers(0, 255), "bool": st.booleans(),
    "f64": st.floats(allow_nan=False), "f32": st.floats(width=32, allow_nan=False),
    "f16": st.floats(width=16, allow_nan=False),
}
def words_launcher(kinds, function, fake):
    """The words entry bound to a table for `kinds`: (launcher(config, *words), table)."""
    table = native.PlanTable(kinds, function, fake.address)
    return native.entries()[0], table


_KIND_LISTS = st.lists(st.sampled_from(sorted(_VALUES)), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None)
@given(data=st.data(), kinds=_KIND_LISTS)
def test_slots_hold_what_struct_packs(data, kinds):
    fake = FakeDriver(len(kinds))
    launcher, table = words_launcher(kinds, 0xC0FFEE, fake)
    words = [data.draw(_VALUES[kind]) for kind in kinds]
    config = native.LaunchConfig((3, 2, 1), (128, 2, 1), 4096, 0xABCDEF)
    assert launcher(table.address, ctypes.addressof(config), *words) == 0
    function, grid, block, shared, stream, slots, extra = fake.calls[-1]
    assert (function, grid, block, shared, stream, extra) == (0xC0FFEE, (3, 2, 1), (128, 2, 1),
                                                              4096, 0xABCDEF, None)
    for kind, word, slot in zip(kinds, words, slots):
        code = launch._SLOT_CODES[kind][0]
        expected = struct.pack("<" + code, word)
        assert slot[:len(expected)] == expected, (kind, word)


def test_numpy_scalars_and_the_driver_result_pass_through():
    kinds = ["f32", "i32", "u64", "bool", "f16"]
    fake = FakeDriver(len(kinds), result=700)
    launcher, table = words_launcher(kinds, 1, fake)
    config = native.LaunchConfig((1, 1, 1), (32, 1, 1), 0, 0)
    words = [np.float32(2.5), np.int32(-9), np.uint64(2**63 + 5), np.bool_(True),
             np.float16(0.333)]
    assert launcher(table.address, ctypes.addressof(config), *words) == 700
    slots = fake.calls[-1][5]
    assert slots[0][:4] == np.float32(2.5).tobytes()
    assert slots[1][:4] == np.int32(-9).tobytes()
    assert slots[2] == np.uint64(2**63 + 5).tobytes()
    assert slots[3][:1] == b"\x01"
    assert slots[4][:2] == np.float16(0.333).tobytes()


def test_no_parameters_pass_a_null_parameter_array():
    fake = FakeDriver(0)
    launcher, table = words_launcher([], 7, fake)
    config = native.LaunchConfig((1, 1, 1), (1, 1, 1), 0, 0)
    assert launcher(table.address, ctypes.addressof(config)) == 0
    assert fake.calls[-1][5] is None


def test_bad_words_raise_and_do_not_launch():
    fake = FakeDriver(2)
    launcher, table = words_launcher(["i64", "f32"], 1, fake)
    config = ctypes.addressof(native.LaunchConfig((1, 1, 1), (1, 1, 1), 0, 0))
    with pytest.raises(TypeError):
        launcher(table.address, config, "three", 1.0)
    with pytest.raises(OverflowError):
        launcher(table.address, config, 2**64, 1.0)
    with pytest.raises(TypeError):
        launcher(table.address, config, 1, "one")
    assert launcher(table.address, config, 1) == native.WRONG_COUNT
    assert fake.calls == []


def test_tables_refuse_what_the_launchers_cannot_hold():
    with pytest.raises(ValueError, match="at most"):
        native.PlanTable(["i64"] * (native.MAX_SLOTS + 1), 1, 1)
    with pytest.raises(ValueError, match="do not fill"):
        native.PlanTable(["i64", "i64"], 1, 1, [native.ScalarArg(int)])


def test_slot_kinds_follow_the_entry_abi():
    params = [Param("value", zm.f32), Param("array", Array(zm.f32, 2)),
              Param("value", zm.bool_), Param("weak", zm.i64)]
    assert launch.slot_kinds(params) == ["f32", "u64", "i64", "i64", "i64", "i64", "bool",
                                         "i64"]


class Held:
    """Stands in for zm.DeviceArray: the guarded launcher reads `_key` and `_words`."""
    __slots__ = ("_key", "_words")

    def __init__(self, key: str, words: tuple):
        self._key, self._words = key, words


class HeldSubclass(Held):
    __slots__ = ()


def _guarded(fake, kinds, specs):
    """The guarded entry bound to a table: launcher(config, *args)."""
    table = native.PlanTable(kinds, 0xF00, fake.address, specs)
    guarded = native.entries()[1]
    return lambda config, *args: guarded(table.address, config, *args)


KEY = "Held f1small"


def test_guarded_launch_reads_the_arguments_itself():
    specs = [native.ArrayArg(Held, KEY, 3), native.ScalarArg(int), native.ScalarArg(np.float32),
             native.ScalarArg(float)]
    kinds = ["u64", "i64", "i64", "i64", "f32", "f64"]
    fake = FakeDriver(6)
    launcher = _guarded(fake, kinds, specs)
    config = native.LaunchConfig((2, 1, 1), (64, 1, 1), 0, 5, driver.DEVICE_EPOCH.value)
    array = Held(KEY, (2**40 + 256, 1000, 1))
    assert launcher(ctypes.addressof(config), array, -4, np.float32(0.5), 2.0) == 0
    words = [2**40 + 256, 1000, 1, -4, np.float32(0.5), 2.0]
    for kind, word, slot in zip(kinds, words, fake.calls[-1][5]):
        expected = struct.pack("<" + launch._SLOT_CODES[kind][0], word)
        assert slot[:len(expected)] == expected, (kind, word)   # the rest is padding
    assert fake.calls[-1][:5] == (0xF00, (2, 1, 1), (64, 1, 1), 0, 5)


def test_guards_decline_other_arguments_without_launching_or_raising():
    specs = [native.ArrayArg(Held, KEY, 3), native.ScalarArg(int)]
    fake = FakeDriver(4)
    launcher = _guarded(fake, ["u64", "i64", "i64", "i64"], specs)
    config = native.LaunchConfig((1, 1, 1), (32, 1, 1), 0, 0, driver.DEVICE_EPOCH.value)
    address = ctypes.addressof(config)
    array = Held(KEY, (64, 8, 1))
    misses = [
        (array, np.int64(3)),                       # another scalar type
        (array, True),                              # bool is not int here
        (HeldSubclass(KEY, (64, 8, 1)), 3),         # exact types only
        (Held("Held f2small", (64, 8, 1, 8, 1)), 3),   # another key
        (Held(KEY, (64, 8)), 3),                    # fewer words than the key promises
        (array,),                                   # too few arguments
        (np.zeros(3), 3),
    ]
    for args in misses:
        assert launcher(address, *args) == native.GUARD_MISS, args
    unset = Held.__new__(Held)                      # slots never assigned: AttributeError
    assert launcher(address, unset, 3) == native.GUARD_MISS
    stale = native.LaunchConfig((1, 1, 1), (32, 1, 1), 0, 0, driver.DEVICE_EPOCH.value - 1)
    assert launcher(ctypes.addressof(stale), array, 3) == native.GUARD_MISS
    assert fake.calls == []
    with pytest.raises(OverflowError):              # the right type, a value too large
        launcher(address, array, 2**70)
    assert fake.calls == []
    assert launcher(address, array, 3) == 0 and len(fake.calls) == 1


# ---- the overlap check of arrays compiled `noalias` ------------------------------------------
def _array_words(pointer, shape, strides):
    return [pointer, *shape, *strides]


# pointers leave room below them for negative strides (no address is below zero)
_SPANS = st.tuples(st.integers(512, 4096), st.lists(st.integers(0, 6), min_size=1, max_size=3),
                   st.lists(st.integers(-4, 4), min_size=3, max_size=3),
                   st.sampled_from([1, 2, 4, 8]))


@settings(max_examples=200, deadline=None)
@given(first=_SPANS, second=_SPANS)
def test_compiled_overlap_check_agrees_with_bytes(first, second):
    """Both arrays' bytes are enumerated: the launcher must refuse (OVERLAP) whenever one byte
    belongs to both, and may only refuse when their byte ranges [lowest, highest] meet (the
    check compares ranges: interleaved views count as overlapping, which costs the
    conservative build, never a wrong result); the Python check of the struct path agrees."""
    arrays, kinds, words, layout = [], [], [], []
    for pointer, shape, strides, item in (first, second):
        strides = strides[:len(shape)]
        layout.append((len(kinds), len(shape), item))
        kinds += ["u64"] + ["i64"] * (2 * len(shape))
        words += _array_words(pointer, shape, strides)
        touched = set()
        for index in np.ndindex(*shape):
            start = pointer + item * sum(i * s for i, s in zip(index, strides))
            touched.update(range(start, start + item))
        arrays.append(touched)
    fake = FakeDriver(len(kinds))
    table = native.PlanTable(kinds, 1, fake.address, pairs=((layout[0], layout[1]),))
    config = native.LaunchConfig((1, 1, 1), (1, 1, 1), 0, 0)
    result = native.entries()[0](table.address, ctypes.addressof(config), *words)
    shared = bool(arrays[0] & arrays[1])
    ranges_meet = all(arrays) and min(arrays[0]) <= max(arrays[1]) \
        and min(arrays[1]) <= max(arrays[0])
    assert result == (native.OVERLAP if ranges_meet else 0)
    assert not shared or result == native.OVERLAP
    assert len(fake.calls) == (0 if ranges_meet else 1)
    assert launch._overlap(((layout[0], layout[1]),), words) == ranges_meet


def test_overlap_pairs_name_only_what_noalias_needs():
    """Two read-only arrays may overlap; a private (noalias) array may not overlap anything
    when either side is written."""
    from zymo.passes.alias import PrivateArrays
    params = [Param("array", Array(zm.f32, 1)), Param("value", zm.f32),
              Param("array", Array(zm.f64, 2)), Param("array", Array(zm.f32, 1))]
    private = PrivateArrays(frozenset({0, 3}), frozenset(), frozenset({3}))
    pairs = launch._overlap_pairs(params, private)
    # slots: array 0 at 0 (1 + 2), the scalar at 3, array 2 at 4 (1 + 4), array 3 at 9
    assert pairs == (((0, 1, 4), (9, 1, 4)), ((4, 2, 8), (9, 1, 4)))
    assert launch._overlap_pairs(params, None) == ()
