"""The names kernels may call. Each is a stub outside kernels; the frontend resolves it by its
`path` (e.g. "atomic.add"), so `zm.atomic.add` and numba's `cuda.atomic.add` mean the same."""
from __future__ import annotations


class Intrinsic:
    """A kernel-language function or value, known to the frontend by `path`."""

    def __init__(self, path: str, doc: str = ""):
        self.path = path
        self.__doc__ = doc or f"zymo intrinsic `{path}` (usable inside kernels only)"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"zm.{self.path} can only be used inside a @zm.kernel or @zm.func")

    def __repr__(self) -> str:
        return f"<zymo intrinsic {self.path}>"


class Namespace:
    """A group of intrinsics (`zm.atomic`, `zm.threadIdx`, ...)."""

    def __init__(self, prefix: str, names: list[str]):
        self.path = prefix
        for name in names:
            setattr(self, name, Intrinsic(f"{prefix}.{name}"))

    def __repr__(self) -> str:
        return f"<zymo namespace {self.path}>"


AXES = ["x", "y", "z"]
threadIdx = Namespace("threadIdx", AXES)
blockIdx = Namespace("blockIdx", AXES)
blockDim = Namespace("blockDim", AXES)
gridDim = Namespace("gridDim", AXES)
shared = Namespace("shared", ["array"])
local = Namespace("local", ["array"])
const = Namespace("const", ["array_like"])
atomic = Namespace("atomic", ["add", "sub", "max", "min", "exch", "cas", "nanmax", "nanmin",
                             "and_", "or_", "xor", "inc", "dec", "compare_and_swap"])

grid = Intrinsic("grid", "zm.grid(n): the global thread index (a tuple of n for n > 1)")
gridsize = Intrinsic("gridsize", "zm.gridsize(n): the total number of threads per axis")
laneid = Intrinsic("laneid", "the thread's lane in its warp, 0..31")
warpsize = Intrinsic("warpsize", "32")
syncthreads = Intrinsic("syncthreads", "block-wide barrier")
threadfence = Intrinsic("threadfence", "memory fence for the device: this thread's writes "
                        "before it are seen by every thread before its writes after it")
threadfence_block = Intrinsic("threadfence_block", "memory fence for the threads of the block")
threadfence_system = Intrinsic("threadfence_system", "memory fence for the device and the host")
shfl_sync = Intrinsic("shfl_sync")
shfl_down_sync = Intrinsic("shfl_down_sync")
shfl_up_sync = Intrinsic("shfl_up_sync")
shfl_xor_sync = Intrinsic("shfl_xor_sync")
ballot_sync = Intrinsic("ballot_sync")
all_sync = Intrinsic("all_sync")
any_sync = Intrinsic("any_sync")
eq_sync = Intrinsic("eq_sync", "zm.eq_sync(mask, p): whether p is the same in every lane of "
                    "the mask")
activemask = Intrinsic("activemask")
syncthreads_count = Intrinsic("syncthreads_count", "zm.syncthreads_count(p): a block-wide "
                              "barrier giving the number of the block's threads where p holds")
syncthreads_and = Intrinsic("syncthreads_and", "zm.syncthreads_and(p): a block-wide barrier "
                            "giving 1 where p holds in every thread of the block, else 0")
syncthreads_or = Intrinsic("syncthreads_or", "zm.syncthreads_or(p): a block-wide barrier "
                           "giving 1 where p holds in some thread of the block, else 0")
syncwarp = Intrinsic("syncwarp", "zm.syncwarp(mask=0xffffffff): the lanes of mask wait for "
                     "each other and see each other's earlier writes")
match_any_sync = Intrinsic("match_any_sync", "zm.match_any_sync(mask, value): the lanes of "
                           "mask whose value equals this lane's")
match_all_sync = Intrinsic("match_all_sync", "zm.match_all_sync(mask, value): (mask, True) "
                           "where every lane of mask holds the same value, else (0, False)")
lanemask_lt = Intrinsic("lanemask_lt", "zm.lanemask_lt(): the u32 mask of the lanes below "
                        "this one")
selp = Intrinsic("selp", "zm.selp(p, a, b): a where p holds, else b")
fma = Intrinsic("fma", "zm.fma(a, b, c) = a * b + c with one rounding")
popc = Intrinsic("popc", "zm.popc(x): the number of set bits of an integer (i32)")
clz = Intrinsic("clz", "zm.clz(x): the zero bits above the highest set bit (i32)")
ffs = Intrinsic("ffs", "zm.ffs(x): the 1-based position of the lowest set bit, 0 for 0 (i32)")
cbrt = Intrinsic("cbrt", "zm.cbrt(x): the cube root (numba's cuda.cbrt; also math.cbrt)")
brev = Intrinsic("brev", "zm.brev(x): the bits of x in reverse order")

# numba's cache-hinted global memory accesses (CUDA's __ldcg, __stcs, ...): the element's value
# is a[i]'s; the hint (PTX's cache operator) only says where it is cached
ldca = Intrinsic("ldca", "zm.ldca(a, i): a[i], cached at all levels (ld.global.ca)")
ldcg = Intrinsic("ldcg", "zm.ldcg(a, i): a[i], cached in L2 only (ld.global.cg)")
ldcs = Intrinsic("ldcs", "zm.ldcs(a, i): a[i], streamed: likely read once (ld.global.cs)")
ldlu = Intrinsic("ldlu", "zm.ldlu(a, i): a[i], its last use (ld.global.lu)")
ldcv = Intrinsic("ldcv", "zm.ldcv(a, i): a[i], fetched again, not cached (ld.global.cv)")
stcg = Intrinsic("stcg", "zm.stcg(a, i, v): a[i] = v, cached in L2 only (st.global.cg)")
stcs = Intrinsic("stcs", "zm.stcs(a, i, v): a[i] = v, streamed (st.global.cs)")
stwb = Intrinsic("stwb", "zm.stwb(a, i, v): a[i] = v, written back (st.global.wb)")
stwt = Intrinsic("stwt", "zm.stwt(a, i, v): a[i] = v, written through to memory "
                 "(st.global.wt)")


class _Unroll(Intrinsic):
    """numba's `literal_unroll`: outside kernels the container itself; inside, a `for` over
    it is unrolled at compile time, so its items may differ in type (a tuple of arrays of
    different dtypes and shapes, of numbers)."""

    def __call__(self, container):
        return container


literal_unroll = _Unroll("literal_unroll", _Unroll.__doc__)



class GridGroup:
    """What `cg.this_grid()` stands for in a kernel: all threads of the launch."""

    sync = Intrinsic("cg.grid_sync", "wait until every thread of the launch arrives "
                     "(the kernel is then launched cooperatively)")

    def __repr__(self) -> str:
        return "the grid group (cg.this_grid())"


GRID_GROUP = GridGroup()
cg = Namespace("cg", ["this_grid"])   # numba's cuda.cg: cooperative groups

MATH_NAMES = ["sqrt", "exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sin", "cos",
              "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "pow", "fabs",
              "floor", "ceil", "trunc", "fmod", "copysign", "hypot", "erf", "isnan", "isinf",
              "fma", "min", "max", "asinh", "acosh", "atanh", "cbrt", "gamma", "lgamma", "erfc",
              "modf", "frexp", "ldexp", "nextafter", "remainder", "degrees", "radians",
              "isfinite", "rint"]


class _Math(Namespace):
    def __init__(self):
        self.path = "math"
        for name in MATH_NAMES:
            setattr(self, name, Intrinsic(name))


math = _Math()


# numba's `cuda.fp16`: float16 arithmetic, comparisons and math, each taking float16 values
FP16_NAMES = ["hadd", "hsub", "hmul", "hdiv", "hneg", "habs", "hfma", "hmax", "hmin", "heq",
              "hne", "hgt", "hge", "hlt", "hle", "hsin", "hcos", "hlog", "hexp", "hsqrt",
              "hrsqrt", "hceil", "hfloor", "hrint", "htrunc", "hlog2", "hlog10", "hexp2",
              "hexp10", "hrcp"]
fp16 = Namespace("fp16", FP16_NAMES)
