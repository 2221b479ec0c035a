"""numba's `cgutils`: helpers for lowering functions written against numba's LLVM builder.
zymo runs no such function (zymo/cuda/extending.py), so these are the names they import,
each refusing to run."""
from __future__ import annotations


def create_struct_proxy(fe_type, kind="value"):
    def make(context, builder, value=None, ref=None):
        raise NotImplementedError(f"a numba lowering function for {fe_type} ran: zymo compiles "
                                  f"kernels without numba's LLVM builder; build the value in a "
                                  f"@cuda.jit(device=True) function instead")
    return make
