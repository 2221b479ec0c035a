"""Python enums in kernels (frontend/enums.py): members compared, passed as arguments, looked up
by name or value, returned from device functions; IntEnum members as ints. Every kernel runs on
the interpreter and the CPU backend against the same function run by Python."""
from __future__ import annotations

import enum

import numpy as np
import pytest

import zymo as zm
from zymo.diagnostics import CompileError
from zymo.runtime.cuda.arguments import param_of_arg

BACKENDS = ("interp", "cpu")


class Color(enum.Enum):
    red = 1
    green = 2
    blue = 3


class Flavor(enum.Enum):
    vanilla = 7
    mint = 3        # the value of Color.blue


class Planet(enum.Enum):
    EARTH = (5.976e24, 6.37814e6)
    MARS = (6.421e23, 3.3972e6)


class Status(enum.IntEnum):
    ok = 200
    not_found = 404
    error = 500


class Size(enum.IntEnum):
    small = 2
    large = 500     # the value of Status.error


def compare(a, b, out):
    out[0] = a == b
    out[1] = a != b
    out[2] = a is b
    out[3] = a is not b


PAIRS = [(Color.red, Color.red), (Color.red, Color.green), (Planet.EARTH, Planet.EARTH),
         (Planet.EARTH, Planet.MARS), (Status.error, Size.large), (Status.ok, Status.ok),
         (Status.ok, Status.not_found)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("a, b", PAIRS, ids=[f"{a.name}-{b.name}" for a, b in PAIRS])
def test_members_as_arguments_compare_as_python(backend, a, b):
    got, expected = np.zeros(4, np.bool_), np.zeros(4, np.bool_)
    zm.kernel(compare).on(backend)[1, 1](a, b, got)
    compare(a, b, expected)
    np.testing.assert_array_equal(got, expected)


def lookups(out):
    out[0] = Color.red == Color.green
    out[1] = Color["blue"] == Color.blue
    out[2] = Color(2) is Color.green
    out[3] = Color.blue.value
    out[4] = Status["not_found"] + 1
    out[5] = Status(500) > Size.small


@pytest.mark.parametrize("backend", BACKENDS)
def test_lookup_by_attribute_name_and_value(backend):
    got, expected = np.zeros(6, np.int64), np.zeros(6, np.int64)
    zm.kernel(lookups).on(backend)[1, 1](got)
    lookups(expected)
    np.testing.assert_array_equal(got, expected)


def int_enum_arithmetic(x, out):
    i = zm.threadIdx.x
    if x[i] > Status.not_found:
        out[i] = x[i] - Status.not_found
    else:
        out[i] = zm.i16(Size.small) * x[i] + Status.ok


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_enum_members_are_ints(backend):
    x = np.array([100, 404, 450, 600], np.int32)
    got = np.zeros(4, np.int32)
    zm.kernel(int_enum_arithmetic).on(backend)[1, 4](x, got)
    np.testing.assert_array_equal(got, np.where(x > 404, x - 404, 2 * x + 200))


@zm.func
def pick(flag):
    return Color.red if flag else Color.green


@zm.func
def shade(c):
    if c == Color.red:
        return Color.blue
    return c


@zm.kernel
def through_device(flags, out):
    i = zm.threadIdx.x
    c = pick(flags[i] > 0)
    out[i, 0] = c == Color.red
    out[i, 1] = shade(c) is Color.blue
    out[i, 2] = shade(c).value


@pytest.mark.parametrize("backend", BACKENDS)
def test_members_returned_from_device_functions(backend):
    flags = np.array([1, 0, 1], np.int32)
    out = np.zeros((3, 3), np.int64)
    through_device.on(backend)[1, 3](flags, out)
    np.testing.assert_array_equal(out, [[1, 1, 3], [0, 0, 2], [1, 1, 3]])


def member_argument_value(c, out):
    out[0] = c.value
    out[1] = c == Color.blue


@pytest.mark.parametrize("backend", BACKENDS)
def test_member_argument_passes_its_value(backend):
    k = zm.kernel(member_argument_value)
    for member in Color:
        out = np.zeros(2, np.int64)
        k.on(backend)[1, 1](member, out)
        assert out.tolist() == [member.value, member is Color.blue]
    assert repr(param_of_arg(Color.red)) == "Color(weak i64)"
    assert repr(param_of_arg(Planet.MARS)) == "Planet(tuple(weak f64, weak f64))"


# ---- what numba rejects --------------------------------------------------------------------
def _error(fn, *args) -> str:
    with pytest.raises(CompileError) as info:
        zm.kernel(fn).specialize(*args)
    return info.value.diagnostics[0].message


def test_members_of_different_enums_do_not_compare():
    def k(out):
        out[0] = Color.blue == Flavor.mint
    assert _error(k, np.zeros(1)) == \
        "cannot compare a member of Color with a member of Flavor"


def test_enum_members_are_not_numbers():
    def with_number(out):
        out[0] = Color.red == 1

    def ordered(out):
        out[0] = Color.red < Color.blue

    def arithmetic(out):
        out[0] = Color.red + 1

    assert _error(with_number, np.zeros(1)).startswith("cannot compare a member of Color with")
    assert _error(ordered, np.zeros(1)) == "members of Color are not ordered"
    assert "enum member Color.red" in _error(arithmetic, np.zeros(1))


def test_unknown_names_and_values():
    def by_name(out):
        out[0] = Color["purple"] == Color.red

    def by_value(out):
        out[0] = Color(9) == Color.red

    assert _error(by_name, np.zeros(1)) == "Color has no member 'purple'"
    assert _error(by_value, np.zeros(1)) == "9 is not a value of Color"
