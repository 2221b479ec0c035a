"""The corpus case record: a kernel, its launch shape, fresh arguments and the expected outputs."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Case:
    """One kernel launch with a NumPy reference.

    `make_args(rng)` builds fresh launch arguments (NumPy arrays, Python or NumPy scalars).
    `reference(args)` gets a deep copy of the arguments taken before the launch and returns
    `{argument index: expected value after the launch}`; every array argument not named there
    must come back unchanged.
    """

    name: str
    kernel: object
    grid: int | tuple
    block: int | tuple
    make_args: Callable[[np.random.Generator], list]
    reference: Callable[[list], dict[int, np.ndarray]]
    rtol: float = 1e-5
    atol: float = 1e-6
    features: tuple[str, ...] = ()
    differentiable: bool = False
    race_free: bool = True


def cdiv(n: int, d: int) -> int:
    """Ceiling division: the number of blocks of `d` threads covering `n` items."""
    return -(-n // d)


def f32(rng: np.random.Generator, *shape, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """Uniform float32 values in [low, high)."""
    return rng.uniform(low, high, size=shape).astype(np.float32)


def f64(rng: np.random.Generator, *shape, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """Uniform float64 values in [low, high)."""
    return rng.uniform(low, high, size=shape)


def ints(rng: np.random.Generator, dtype, *shape, low=None, high=None) -> np.ndarray:
    """Uniform integers of `dtype` in [low, high) (the dtype's whole range by default)."""
    info = np.iinfo(dtype)
    low = info.min if low is None else low
    high = int(info.max) + 1 if high is None else high
    return rng.integers(low, high, size=shape, dtype=dtype)


def wide(a: np.ndarray) -> np.ndarray:
    """A float64 copy of an array, for references computed in double precision."""
    return np.asarray(a, dtype=np.float64)
