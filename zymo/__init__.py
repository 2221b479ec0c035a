"""zymo: compile, differentiate and evolve GPU kernels written in Python."""
from .diagnostics import (  # noqa: F401
    BoundsError, CompileError, InternalError, KernelRuntimeError, LaunchError, RaceError,
)
from .lang import *  # noqa: F401,F403
from .lang import DeviceFunction, func, math  # noqa: F401
from .ad import Active, BatchDuplicated, Const, Duplicated, DuplicatedNoNeed  # noqa: F401
from .runtime import Kernel, kernel  # noqa: F401
from .runtime.check import GradReport, check_grad, check_jvp  # noqa: F401
from .runtime.grad import GradKernel, grad  # noqa: F401
from .runtime.hvp import ForwardOverReverse, hvp  # noqa: F401
from .runtime.jvp import JvpKernel, jvp  # noqa: F401
from .runtime.tape import Tape  # noqa: F401
from .runtime.evolution import EvolveResult, VariantKernel, evolve, gpu_cluster, load_variant  # noqa: F401,E501
from .runtime.cuda import (  # noqa: F401
    CudaError, DeviceArray, Event, Stream, device_array, synchronize, to_device,
)

__version__ = "0.1.0"

# numba's top-level names for code ported from numba.cuda (`from zymo import types, errors,
# vectorize, guvectorize`), resolved on first use so that `import zymo` does not import
# zymo.cuda
_NUMBA_NAMES = {"types": ("zymo.cuda.types", None), "errors": ("zymo.cuda.core.errors", None),
                "vectorize": ("zymo.cuda.vectorize", "vectorize"),
                "guvectorize": ("zymo.cuda.vectorize", "guvectorize"),
                "typeof": ("zymo.cuda.typing", "typeof"),
                # zymo kernels as PyTorch operators; imports torch, so only when named
                "torch": ("zymo.interop.torch", None),
                # and as JAX functions (XLA FFI custom calls); imports jax
                "jax": ("zymo.interop.jax", None)}


def __getattr__(name):
    found = _NUMBA_NAMES.get(name)
    if found is None:
        raise AttributeError(f"module 'zymo' has no attribute {name!r}")
    import importlib
    module = importlib.import_module(found[0])
    return module if found[1] is None else getattr(module, found[1])
