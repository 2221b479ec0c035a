"""Foreign GPU arrays (PyTorch, CuPy) through the compiled guarded launcher, on the CPU: the
launcher reads each array's pointer and layout itself at every launch and launches only when
the layout is the plan's; anything else (changed strides, ndim, dtype, placement, an exception
from the library) is a miss that launches nothing and leaves no error set. Stand-ins carry the
attributes the readers name; real CPU tensors check PyTorch's own."""
from __future__ import annotations

import ctypes
import sys

import numpy as np
import pytest

import zymo as zm
from zymo.frontend import Param
from zymo.ir.types import Array
from zymo.runtime.cuda import driver, launch, native

from .test_native_launch import FakeDriver, Held

TORCH = launch._READER_OF[launch._describe_torch]
CUPY = launch._READER_OF[launch._describe_cupy]


class FakeTensor:
    """What the PyTorch reader reads of a tensor (strides in elements)."""

    def __init__(self, pointer, shape, strides, dtype="f32", is_cuda=True):
        self.pointer, self.shape, self.strides = pointer, tuple(shape), tuple(strides)
        self.dtype, self.is_cuda = dtype, is_cuda

    def data_ptr(self):
        return self.pointer

    def stride(self):
        return self.strides


class Memory:
    def __init__(self, ptr):
        self.ptr = ptr


class FakeCupy:
    """What the CuPy reader reads of an array (strides in bytes)."""

    def __init__(self, pointer, shape, strides, itemsize=4, dtype="f32"):
        self.data, self.shape = Memory(pointer), tuple(shape)
        self.strides = tuple(s * itemsize for s in strides)
        self.dtype = dtype


class Raising(FakeTensor):
    def data_ptr(self):
        raise RuntimeError("no storage")


def _array_kinds(ndim):
    return ["u64"] + ["i64"] * (2 * ndim)


def _launcher(fake, specs, kinds, pairs=()):
    table = native.PlanTable(kinds, 0xF00, fake.address, specs, pairs)
    guarded = native.entries()[1]
    config = native.LaunchConfig((1, 1, 1), (32, 1, 1), 0, 0, driver.DEVICE_EPOCH.value)
    return lambda *args: guarded(table.address, ctypes.addressof(config), *args), \
        (table, config)


def _slots(fake):
    return [int.from_bytes(s, "little", signed=True) for s in fake.calls[-1][5]]


def test_torch_and_cupy_readers_put_pointer_extents_and_element_strides_in_the_slots():
    specs = [native.ForeignArrayArg(FakeTensor, TORCH, "f32", 4, 2, True, True),
             native.ScalarArg(float),
             native.ForeignArrayArg(FakeCupy, CUPY, "f32", 4, 1, False, False)]
    kinds = _array_kinds(2) + ["f64"] + _array_kinds(1)
    fake = FakeDriver(len(kinds))
    run, _ = _launcher(fake, specs, kinds)
    tensor = FakeTensor(2**40, (3, 5), (5, 1))
    array = FakeCupy(2**41 + 64, (7,), (-2,))
    for pointer in (2**40, 2**40 + 4096):     # a new pointer each launch is read anew
        tensor.pointer = pointer
        assert run(tensor, 2.5, array) == 0
        slots = _slots(fake)
        assert slots[:5] == [pointer, 3, 5, 5, 1]
        assert slots[6:] == [2**41 + 64, 7, -2]
        assert np.float64(2.5).tobytes() == fake.calls[-1][5][5]
    assert len(fake.calls) == 2


def test_layouts_other_than_the_plans_miss_without_launching_or_raising():
    specs = [native.ForeignArrayArg(FakeTensor, TORCH, "f32", 4, 2, True, True),
             native.ForeignArrayArg(FakeCupy, CUPY, "f32", 4, 1, True, True)]
    kinds = _array_kinds(2) + _array_kinds(1)
    fake = FakeDriver(len(kinds))
    run, _ = _launcher(fake, specs, kinds)
    good_tensor, good_array = FakeTensor(4096, (3, 5), (5, 1)), FakeCupy(8192, (9,), (1,))
    unaligned = FakeCupy(8192, (9,), (1,))
    unaligned.strides = (6,)                             # not a whole number of elements
    misses = [
        (FakeTensor(4096, (3, 5), (1, 3)), good_array),  # transposed: not C-contiguous
        (FakeTensor(4096, (15,), (1,)), good_array),     # one axis, the plan has two
        (FakeTensor(4096, (3, 5), (5,)), good_array),    # strides of the wrong length
        (FakeTensor(4096, (3, 5), (5, 1), dtype="f64"), good_array),
        (FakeTensor(4096, (3, 5), (5, 1), is_cuda=False), good_array),
        (FakeTensor(4096, (3, 5), (5, 1), is_cuda=1), good_array),   # True itself only
        (FakeTensor(4096, (2**16, 2**16), (2**16, 1)), good_array),  # 2**32 elements: large
        (FakeTensor(4096, (3, 5.0), (5, 1)), good_array),            # not an int
        (Raising(4096, (3, 5), (5, 1)), good_array),
        (good_tensor, FakeCupy(8192, (9,), (2,))),       # strided: not the plan's layout
        (good_tensor, unaligned),
        (good_tensor, FakeTensor(8192, (9,), (1,))),     # another type
        (good_tensor, Held("DeviceArray f1small", (8192, 9, 1))),
    ]
    for args in misses:
        assert run(*args) == native.GUARD_MISS, args
    broken = FakeTensor(4096, (3, 5), (5, 1))
    del broken.shape                                     # AttributeError inside: a miss
    assert run(broken, good_array) == native.GUARD_MISS
    assert fake.calls == []
    assert run(good_tensor, good_array) == 0 and len(fake.calls) == 1


def test_extent_one_axes_and_empty_arrays_count_as_contiguous():
    specs = [native.ForeignArrayArg(FakeTensor, TORCH, "f32", 4, 3, True, True)]
    fake = FakeDriver(7)
    run, _ = _launcher(fake, specs, _array_kinds(3))
    assert run(FakeTensor(64, (4, 1, 3), (3, 99, 1))) == 0      # numpy's rule, as the key's
    assert run(FakeTensor(64, (4, 0, 3), (7, 5, 2))) == 0
    assert run(FakeTensor(64, (4, 2, 3), (3, 99, 1))) == native.GUARD_MISS
    assert len(fake.calls) == 2


def test_overlapping_foreign_arrays_are_refused_for_the_aliased_build():
    specs = [native.ForeignArrayArg(FakeCupy, CUPY, "f32", 4, 1, True, True)] * 2
    kinds = _array_kinds(1) * 2
    fake = FakeDriver(len(kinds))
    run, _ = _launcher(fake, specs, kinds, pairs=(((0, 1, 4), (3, 1, 4)),))
    assert run(FakeCupy(4096, (16,), (1,)), FakeCupy(4096 + 60, (16,), (1,))) == native.OVERLAP
    assert fake.calls == []
    assert run(FakeCupy(4096, (16,), (1,)), FakeCupy(4096 + 64, (16,), (1,))) == 0


def test_reading_keeps_no_references():
    dtype = object()                                     # its count is this test's alone
    specs = [native.ForeignArrayArg(FakeCupy, CUPY, dtype, 4, 2, True, True)]
    fake = FakeDriver(5)
    run, _ = _launcher(fake, specs, _array_kinds(2))
    array = FakeCupy(2**33, (2**20, 3), (3, 1), dtype=dtype)
    wrong = FakeCupy(2**33, (2**20, 3), (4, 1), dtype=dtype)   # misses after reading all
    wrong.data, wrong.shape = array.data, array.shape
    held = (array.data, array.shape, array.strides, array.data.ptr, array.shape[0], dtype)
    before = [sys.getrefcount(x) for x in held]
    for _ in range(1000):
        assert run(array) == 0
        assert run(wrong) == native.GUARD_MISS
    assert [sys.getrefcount(x) for x in held] == before


class SlotCupy:
    """A CuPy stand-in whose parts are object members (`__slots__`), read directly by the
    launcher, with CuPy's contiguity flag."""

    __slots__ = ("data", "shape", "strides", "dtype", "_c_contiguous")

    def __init__(self, pointer, shape, strides, itemsize=4, dtype="f32"):
        self.data, self.shape = Memory(pointer), tuple(shape)
        self.strides = tuple(s * itemsize for s in strides)
        self.dtype = dtype
        self._c_contiguous = all(s == c for s, c, n in zip(
            strides, np.cumprod((1,) + self.shape[:0:-1])[::-1], shape) if n != 1)


def test_member_parts_are_read_directly_and_the_flag_replaces_the_strides():
    contiguous = native.ForeignArrayArg(SlotCupy, CUPY, "f32", 4, 2, True, True)
    strided = native.ForeignArrayArg(SlotCupy, CUPY, "f32", 4, 2, False, False)
    for name in ("dtype", "shape", "_c_contiguous"):
        assert getattr(contiguous.reader, {"_c_contiguous": "contiguous_part"}.get(
            name, name)).mode == native.MEMBER
    assert strided.reader.contiguous_part.mode == native.ABSENT
    fake = FakeDriver(5)
    run, _ = _launcher(fake, [contiguous], _array_kinds(2))
    array = SlotCupy(4096, (3, 1), (1, 1))            # extent-1 axis: its stride is free
    array.strides = (4, 396)
    assert run(array) == 0
    assert _slots(fake) == [4096, 3, 1, 1, 1]         # C order's strides, not the tuple's
    array._c_contiguous = False                       # the flag decides, read at each launch
    assert run(array) == native.GUARD_MISS
    del array.data                                    # an unset member: a miss
    array._c_contiguous = True
    assert run(array) == native.GUARD_MISS
    run, _ = _launcher(fake, [strided], _array_kinds(2))
    assert run(SlotCupy(4096, (3, 4), (8, 2))) == 0
    assert _slots(fake) == [4096, 3, 4, 8, 2]
    assert run(SlotCupy(4096, (3, 4), (4, 1))) == native.GUARD_MISS
    assert len(fake.calls) == 2


def test_a_part_the_type_lacks_is_optional_only_for_the_flag():
    spec = native.ForeignArrayArg(FakeCupy, CUPY, "f32", 4, 1, True, True)
    assert spec.reader.contiguous_part.mode == native.ABSENT     # the strides are read
    assert spec.reader.shape.mode == native.ATTRIBUTE            # an instance attribute
    fake = FakeDriver(3)
    run, _ = _launcher(fake, [spec], _array_kinds(1))
    assert run(FakeCupy(64, (5,), (1,))) == 0 and _slots(fake) == [64, 5, 1]


torch = pytest.importorskip("torch")


def test_torch_parts_are_found_on_the_type():
    spec = native.ForeignArrayArg(torch.Tensor, TORCH, torch.float32, 4, 1, True, True)
    reader = spec.reader
    assert (reader.flag.mode, reader.dtype.mode, reader.shape.mode) == (native.GETSET,) * 3
    assert reader.pointer.mode == native.NOARGS
    assert (reader.strides.mode, reader.contiguous_part.mode) == (native.CALL_DESCRIPTOR,) * 2


def test_real_tensors_read_as_the_general_describer_reads_them():
    """PyTorch's own `data_ptr()`, `shape` and `stride()` (CPU tensors, with the placement
    flag left out): views and in-place resizes are seen at each launch."""
    reader = native.ArrayReader(dtype="dtype", pointer="data_ptr()", shape="shape",
                                strides="stride()")
    base = torch.zeros(6, 8)
    specs = [native.ForeignArrayArg(torch.Tensor, reader, torch.float32, 4, 2, False, False)]
    fake = FakeDriver(5)
    run, _ = _launcher(fake, specs, _array_kinds(2))
    view = base[1:, ::2]
    assert run(view) == 0
    assert _slots(fake) == [view.data_ptr(), 5, 4, 8, 2]
    assert run(base.t()) == 0
    assert _slots(fake) == [base.data_ptr(), 8, 6, 1, 8]
    assert run(base) == native.GUARD_MISS                 # contiguous: another plan
    contiguous = native.ArrayReader(dtype="dtype", pointer="data_ptr()", shape="shape",
                                    strides="stride()", contiguous="is_contiguous()")
    whole = native.ForeignArrayArg(torch.Tensor, contiguous, torch.float32, 4, 2, True, True)
    run_whole, _ = _launcher(fake, [whole], _array_kinds(2))
    assert run_whole(base) == 0 and _slots(fake) == [base.data_ptr(), 6, 8, 8, 1]
    column = base[:, :1]                                  # (6, 1), strides (8, 1): contiguous
    assert run_whole(base[2:3]) == 0 and _slots(fake) == [base[2:3].data_ptr(), 1, 8, 8, 1]
    assert run_whole(column) == native.GUARD_MISS         # strided, to PyTorch as to NumPy
    assert run_whole(view) == native.GUARD_MISS
    del fake.calls[-2:]
    assert run(base.double()[:, ::2]) == native.GUARD_MISS
    resized = base[:, ::2].clone()[:, ::2]
    assert run(resized) == 0
    resized.resize_(48)                                   # one axis now
    assert run(resized) == native.GUARD_MISS
    assert len(fake.calls) == 3
    cpu = native.ForeignArrayArg(torch.Tensor, TORCH, torch.float32, 4, 2, False, False)
    run, _ = _launcher(fake, [cpu], _array_kinds(2))
    assert run(view) == native.GUARD_MISS                 # not on CUDA


# ---- the plan: which arguments get a guarded launcher --------------------------------------
class _Plan(launch.LaunchPlan):
    """A LaunchPlan's guarded-launcher part, without a device."""

    def __init__(self, params, fake):
        self.params, self.launchers, self.device = params, native.entries(), None
        self.kinds = launch.slot_kinds(params)
        self.function, self.launch_address, self.pairs = 0xF00, fake.address, ()
        self.table = native.PlanTable(self.kinds, 0xF00, fake.address)
        self._guarded = {}
        self.run = self._launch = self._launch_native


def test_plans_build_guarded_launchers_for_reader_types(monkeypatch):
    monkeypatch.setitem(launch._READERS, FakeTensor, TORCH)
    monkeypatch.setitem(launch._READERS, FakeCupy, CUPY)
    params = (Param("array", Array(zm.f32, 1)), Param("array", Array(zm.f32, 2, layout="A")))
    fake = FakeDriver(8)
    plan = _Plan(params, fake)
    config = native.LaunchConfig((1, 1, 1), (32, 1, 1), 0, 0, driver.DEVICE_EPOCH.value)
    state = (None, ctypes.addressof(config), config)
    args = (FakeCupy(4096, (10,), (1,)), FakeTensor(8192, (4, 4), (8, 2)))
    key = (("f", 1, True, True), ("f32", 2, False, False))
    fast = plan.fast_launcher(key, state, args)
    assert fast is not None and plan.fast_launcher(key, state, args).args == fast.args
    assert fast(*args) == 0 and _slots(fake) == [4096, 10, 1, 8192, 4, 4, 8, 2]
    assert fast(args[0], FakeTensor(8192, (4, 4), (4, 1))) == native.GUARD_MISS
    other = (args[0], FakeTensor(8192, (4, 4), (8, 2), dtype="f32 again"))
    assert plan.fast_launcher(key, state, other).args != fast.args   # its own dtype object
    unknown = (args[0], type("Other", (), {"dtype": "f32"})())
    assert plan.fast_launcher(key, state, unknown) is None


# ---- JAX: the words the describer left on the array, its pointer read anew ------------------
def test_jax_arrays_launch_from_the_words_left_on_them():
    jnp = pytest.importorskip("jax.numpy")
    reader = launch._READER_OF[launch._describe_jax]
    device = object()                                    # the plan's device, as a memo names it
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    spec = native.ForeignArrayArg(type(x), reader, x.dtype, 4, 2, True, True, owner=device)
    assert spec.reader.pointer.mode == native.CALL_DESCRIPTOR     # nanobind's method
    fake = FakeDriver(5)
    run, _ = _launcher(fake, [spec], _array_kinds(2))

    def remembered(array, owner=device, pointer=None, strides=None):
        launch.remember_jax(array, array.dtype, owner,
                            array.unsafe_buffer_pointer() if pointer is None else pointer,
                            array.shape, strides or (array.shape[1], 1))
        return array

    assert run(x) == native.GUARD_MISS                   # nothing left on it yet
    remembered(x)
    assert run(x) == 0
    assert _slots(fake) == [x.unsafe_buffer_pointer(), 3, 4, 4, 1]
    y = remembered(jnp.ones((5, 2), jnp.float32))
    assert run(y) == 0 and _slots(fake) == [y.unsafe_buffer_pointer(), 5, 2, 2, 1]
    misses = [
        remembered(jnp.ones((3, 4), jnp.float32), owner=object()),      # another device
        remembered(jnp.ones((3, 4), jnp.float32), pointer=64),          # another buffer
        remembered(jnp.ones((3, 4), jnp.int32)),                        # another dtype
        remembered(jnp.ones((4, 3), jnp.float32), strides=(1, 4)),      # column-major
    ]
    flat = jnp.ones(12, jnp.float32)                     # one axis: a memo of another length
    launch.remember_jax(flat, flat.dtype, device, flat.unsafe_buffer_pointer(), (12,), (1,))
    listed = jnp.ones((3, 4), jnp.float32)
    setattr(listed, launch.JAX_MEMO, list(getattr(remembered(listed), launch.JAX_MEMO)))
    for array in misses + [flat, listed]:
        assert run(array) == native.GUARD_MISS
    deleted = remembered(jnp.ones((3, 4), jnp.float32))
    assert run(deleted) == 0
    deleted.delete()                                     # as donation does: the pointer raises
    assert run(deleted) == native.GUARD_MISS
    assert len(fake.calls) == 3
    memo = getattr(x, launch.JAX_MEMO)
    held = (memo, memo[2], memo[1], x)
    before = [sys.getrefcount(h) for h in held]
    for _ in range(1000):
        assert run(x) == 0
        assert run(misses[1]) == native.GUARD_MISS
    assert [sys.getrefcount(h) for h in held] == before


def test_jax_arrays_get_the_jax_describer_which_refuses_host_memory():
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.zeros((2, 3), jnp.float32)
    assert launch._describer_for(type(x)) is launch._describe_jax
    assert launch._READERS[type(x)] is launch._READER_OF[launch._describe_jax]
    with pytest.raises(zm.LaunchError, match="host memory"):
        launch._describe_jax(x, [], [])
    assert not hasattr(x, launch.JAX_MEMO)
