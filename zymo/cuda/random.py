"""numba's `cuda.random`: xoroshiro128+ generators, one per thread, with the streams numba's
give (the same SplitMix64 seeding, 2**64-step jumps between generators and float conversions),
so a kernel draws the numbers its numba twin draws.

A generator's state is two uint64 words. States live in a record array of
`xoroshiro128p_dtype` (NumPy, for the CPU backend) or, on a GPU, in a (n, 2) uint64 device
array; the draws (`xoroshiro128p_uniform_float32`, ...) are device functions taking either.
Initialization runs on the host: jumping is linear over GF(2), so generator i's state is
J**i applied to the first, computed for all generators at once from the powers J**(2**k).
"""
from __future__ import annotations

import math

import numpy as np

import zymo as zm

xoroshiro128p_dtype = np.dtype([("s0", np.uint64), ("s1", np.uint64)], align=True)
_MASK = (1 << 64) - 1
_JUMP = (0xBEAC0467EBA5FACB, 0xD86B048B86AA9922)   # xoroshiro128+'s published jump polynomial


# ---- the generator, on the host (Python integers) ------------------------------------------
def _splitmix64(seed: int) -> int:
    z = (seed + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _rotl_int(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & _MASK


def _next_int(s0: int, s1: int) -> tuple[int, int]:
    s1 ^= s0
    return _rotl_int(s0, 55) ^ s1 ^ ((s1 << 14) & _MASK), _rotl_int(s1, 36)


def _jump_int(s0: int, s1: int) -> tuple[int, int]:
    t0 = t1 = 0
    for word in _JUMP:
        for bit in range(64):
            if word >> bit & 1:
                t0, t1 = t0 ^ s0, t1 ^ s1
            s0, s1 = _next_int(s0, s1)
    return t0, t1


# ---- jumps as GF(2) matrices applied to many states at once --------------------------------
class _Linear:
    """A linear map of 128-bit states, as 16 tables (one per state byte) of the images of
    that byte's 256 values, each image an (s0, s1) pair of uint64."""

    def __init__(self, columns: np.ndarray):
        # columns[b] = the image of the state with only bit b set (b < 64: s0, else s1)
        tables = np.zeros((16, 256, 2), np.uint64)
        for byte in range(16):
            for bit in range(8):
                step = 1 << bit
                tables[byte, step:2 * step] = tables[byte, :step] ^ columns[8 * byte + bit]
        self.tables = tables

    def __call__(self, states: np.ndarray) -> np.ndarray:
        """The images of `states` ((n, 2) uint64)."""
        out = np.zeros_like(states)
        for byte in range(16):
            word, shift = divmod(byte, 8)
            values = (states[:, word] >> np.uint64(8 * shift)) & np.uint64(0xFF)
            out ^= self.tables[byte, values.astype(np.intp)]
        return out

    def squared(self) -> "_Linear":
        return _Linear(self(self(_unit_states())))


def _unit_states() -> np.ndarray:
    units = np.zeros((128, 2), np.uint64)
    for b in range(128):
        units[b, b // 64] = np.uint64(1 << (b % 64))
    return units


_POWERS: list[_Linear] = []   # the jump applied 2**k times, made as needed


def _jump_power(k: int) -> _Linear:
    while len(_POWERS) <= k:
        if not _POWERS:
            columns = np.array([_jump_int(int(s0), int(s1)) for s0, s1 in _unit_states()],
                               np.uint64)
            _POWERS.append(_Linear(columns))
        else:
            _POWERS.append(_POWERS[-1].squared())
    return _POWERS[k]


def _jumped(states: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each of `states` advanced by its count of jumps."""
    states = states.copy()
    k = 0
    while np.any(counts >> np.uint64(k)):
        chosen = ((counts >> np.uint64(k)) & np.uint64(1)).astype(bool)
        if chosen.any():
            states[chosen] = _jump_power(k)(states[chosen])
        k += 1
    return states


def _initial_words(n: int, seed: int, subsequence_start: int) -> np.ndarray:
    """The (n, 2) uint64 states numba's initialization makes."""
    z = _splitmix64(int(seed) & _MASK)
    first = np.array([[z, z]], np.uint64)
    first = _jumped(first, np.array([int(subsequence_start)], np.uint64))
    return _jumped(np.repeat(first, n, axis=0), np.arange(n, dtype=np.uint64))


def init_xoroshiro128p_states(states, seed, subsequence_start=0, stream=0) -> None:
    """Fill `states` (a record array of xoroshiro128p_dtype, a (n, 2) uint64 array, or a GPU
    array of either) with n generators 2**64 draws apart, the first seeded by `seed` and
    advanced by `subsequence_start` jumps."""
    n = len(states)
    words = _initial_words(n, seed, subsequence_start)
    if isinstance(states, np.ndarray):
        states.view(np.uint64).reshape(n, 2)[:] = words
    else:
        states.copy_from_host(words)


def create_xoroshiro128p_states(n, seed, subsequence_start=0, stream=0):
    """n generators (see init_xoroshiro128p_states) in a device array: (n, 2) uint64 on a GPU
    (zymo's GPU arrays hold no record dtypes), records of xoroshiro128p_dtype in host memory
    where zymo.cuda runs on the CPU."""
    from .cudadrv.devicearray import device_array
    from .mode import on_gpu
    states = device_array((n, 2), np.uint64) if on_gpu() else \
        device_array(n, xoroshiro128p_dtype)
    init_xoroshiro128p_states(states, seed, subsequence_start, stream)
    return states


# ---- draws, in kernels -----------------------------------------------------------------------
@zm.func
def _rotl(x, k):
    return (x << k) | (x >> (64 - k))


@zm.func
def xoroshiro128p_next(states, index):
    """The next uint64 of generator `index`, advancing it."""
    if states.ndim == 2:
        s0 = states[index, 0]
        s1 = states[index, 1]
    else:
        s0 = states[index]["s0"]
        s1 = states[index]["s1"]
    result = s0 + s1
    s1 ^= s0
    n0 = _rotl(s0, 55) ^ s1 ^ (s1 << 14)
    n1 = _rotl(s1, 36)
    if states.ndim == 2:
        states[index, 0] = n0
        states[index, 1] = n1
    else:
        states[index]["s0"] = n0
        states[index]["s1"] = n1
    return result


@zm.func
def _unit_float64(x):
    return zm.f64(x >> 11) * (1.0 / 9007199254740992.0)


@zm.func
def xoroshiro128p_uniform_float64(states, index):
    """A float64 in [0, 1) from generator `index` (53 random bits)."""
    return _unit_float64(xoroshiro128p_next(states, index))


@zm.func
def xoroshiro128p_uniform_float32(states, index):
    """A float32 in [0, 1]: the float64 draw rounded to float32, as numba's."""
    return zm.f32(_unit_float64(xoroshiro128p_next(states, index)))


TWO_PI_FLOAT32 = np.float32(2 * math.pi)
TWO_PI_FLOAT64 = np.float64(2 * math.pi)


@zm.func
def xoroshiro128p_normal_float32(states, index):
    """A standard normal float32 (Box-Muller of two float32 draws, the cosine branch)."""
    u1 = xoroshiro128p_uniform_float32(states, index)
    u2 = xoroshiro128p_uniform_float32(states, index)
    return math.sqrt(zm.f32(-2.0) * math.log(u1)) * math.cos(TWO_PI_FLOAT32 * u2)


@zm.func
def xoroshiro128p_normal_float64(states, index):
    """A standard normal float64, from two float32 draws as numba's (its logarithm is taken
    in float32, the rest in float64)."""
    u1 = xoroshiro128p_uniform_float32(states, index)
    u2 = xoroshiro128p_uniform_float32(states, index)
    return math.sqrt(zm.f64(-2.0) * math.log(u1)) * math.cos(TWO_PI_FLOAT64 * u2)


__all__ = ["create_xoroshiro128p_states", "init_xoroshiro128p_states", "xoroshiro128p_dtype",
           "xoroshiro128p_next", "xoroshiro128p_normal_float32", "xoroshiro128p_normal_float64",
           "xoroshiro128p_uniform_float32", "xoroshiro128p_uniform_float64"]
