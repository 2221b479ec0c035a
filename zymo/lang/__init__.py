"""The kernel language: intrinsic names and types (no compiler logic)."""
from ..ir.types import (  # noqa: F401
    Array, bool_, c64, c128, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64,
)
from .intrinsics import (  # noqa: F401
    Intrinsic, Namespace, activemask, all_sync, any_sync, atomic, ballot_sync, blockDim, eq_sync,
    blockIdx, brev, cbrt, cg, clz, const, ffs, fma, fp16, grid, gridDim, gridsize, laneid, local,
    math, popc, shared, shfl_down_sync, shfl_sync, shfl_up_sync, shfl_xor_sync, syncthreads,
    threadfence, threadfence_block, threadfence_system, threadIdx, warpsize,
)
from .intrinsics import (  # noqa: F401  (numba.cuda's block votes, warp matches, selp)
    lanemask_lt, match_all_sync, match_any_sync, selp, syncthreads_and, syncthreads_count,
    syncthreads_or, syncwarp,
)
from .intrinsics import (  # noqa: F401  (numba.cuda's cache-hinted loads and stores)
    ldca, ldcg, ldcs, ldcv, ldlu, stcg, stcs, stwb, stwt,
)
from .intrinsics import literal_unroll  # noqa: F401  (numba's, unrolling a loop over a tuple)
from .decorators import DeviceFunction, func  # noqa: F401,E402
from .derivatives import (  # noqa: F401,E402
    Gradient, Jacobian, default_width, jacfwd, jacrev, vjp,
)
