"""numba's `cuda.reduce` / `cuda.Reduce`: a binary function made into a reduction over a 1-d
array, on the GPU for GPU arrays and on zymo's CPU backend for NumPy arrays.

Only associativity is assumed (not commutativity): each thread folds a contiguous run of
elements in order, then a block folds its threads' results pairwise in order (stride-doubling
tree in shared memory), and the blocks' partial results are reduced again the same way,
until one value is left; `init` is folded in first. Threads past the end hold no value (a flag
beside each partial), so no identity element is needed.
"""
from __future__ import annotations

import numpy as np

import zymo as zm

_THREADS = 128
_PER_THREAD = 8


def _make_kernel(op, dtype):
    """The block reduction for `op` over arrays of `dtype`: partial[b] (and valid[b]) from
    the elements block b covers."""
    threads, per_thread = _THREADS, _PER_THREAD

    @zm.kernel
    def block_reduce(values, count, partial, valid):
        tid = zm.threadIdx.x
        start = (zm.blockIdx.x * threads + tid) * per_thread
        acc = zm.shared.array(threads, dtype)
        has = zm.shared.array(threads, zm.i32)
        has[tid] = 0
        if start < count:
            total = values[start]
            for k in range(start + 1, min(start + per_thread, count)):
                total = op(total, values[k])
            acc[tid] = total
            has[tid] = 1
        zm.syncthreads()
        stride = 1
        while stride < threads:
            if tid % (2 * stride) == 0 and has[tid + stride] != 0:
                if has[tid] != 0:
                    acc[tid] = op(acc[tid], acc[tid + stride])
                else:
                    acc[tid] = acc[tid + stride]
                    has[tid] = 1
            zm.syncthreads()
            stride *= 2
        if tid == 0:
            partial[zm.blockIdx.x] = acc[0]
            valid[zm.blockIdx.x] = has[0]

    return block_reduce


class Reduce:
    """`Reduce(op)(array, res=None, init=0, size=None, stream=0)`: op folded over
    `array[:size]` after `init`; returns the result, or writes it to `res[0]` when given."""

    def __init__(self, op):
        self.op = zm.func(getattr(op, "py_func", op))
        self.py_func = getattr(op, "py_func", op)
        self.__name__ = getattr(op, "__name__", "reduce")
        self.kernels: dict = {}

    def _kernel(self, dtype):
        kernel = self.kernels.get(dtype)
        if kernel is None:
            kernel = self.kernels[dtype] = _make_kernel(self.op, dtype)
        return kernel

    def __call__(self, array, res=None, init=0, size=None, stream=0):
        on_gpu = not isinstance(array, np.ndarray) and hasattr(array,
                                                               "__cuda_array_interface__")
        if on_gpu:
            dtype = np.dtype(array.__cuda_array_interface__["typestr"])
            count = array.__cuda_array_interface__["shape"][0]
        else:
            array = np.asarray(array)
            dtype, count = array.dtype, array.shape[0]
        if array_ndim(array) != 1:
            raise TypeError(f"{self.__name__}: reduce takes a 1-d array")
        count = count if size is None else min(int(size), count)
        values = array
        while count > 1 or values is array:
            if count == 0:
                break
            blocks = -(-count // (_THREADS * _PER_THREAD))
            partial = zm.device_array(blocks, dtype) if on_gpu else np.empty(blocks, dtype)
            flags = zm.device_array(blocks, np.int32) if on_gpu else np.empty(blocks, np.int32)
            self._kernel(dtype)[blocks, _THREADS, stream](values, count, partial, flags)
            values, count = partial, blocks
            if blocks == 1:
                break
        result = dtype.type(init)
        if count:
            host = values.copy_to_host() if on_gpu else values
            result = dtype.type(self.py_func(result, host[0]))
        if res is not None:
            if hasattr(res, "copy_from_host") and not isinstance(res, np.ndarray):
                res.copy_from_host(np.array([result], dtype))
            else:
                res[0] = result
            return None
        return result


def array_ndim(array) -> int:
    if isinstance(array, np.ndarray):
        return array.ndim
    return len(array.__cuda_array_interface__["shape"])


def reduce(op):
    """`@cuda.reduce`: see Reduce."""
    return Reduce(op)
