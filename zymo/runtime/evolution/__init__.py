"""Evolution joined to the runtime: variants compiled and launched, evaluated in isolated
workers, searched (`evolve`), analysed and reported. The genome itself is `zymo.genome`."""
from .cluster import DaskExecutor, gpu_cluster  # noqa: F401
from .options import ExecutionOptions, SearchOptions, ValidationOptions  # noqa: F401
from .result import EvolveResult  # noqa: F401
from .search import evolve  # noqa: F401
from .validation import Fitness, default_check  # noqa: F401
from .variant import VariantKernel  # noqa: F401
from .workers import EvaluationTimeout, IsolatedPool, WorkerCrashed, WorkersCannotStart  # noqa: F401


def load_variant(kernel, path, activities=None, launch=None) -> VariantKernel:
    """The variant of `kernel` whose edit list was saved at `path` (`variant.save(path)`).
    For a derivative (`zm.grad(k)`, `zm.jvp(k)`) also give example `activities` and the
    `launch` (grid, block) as `zm.evolve` had them: they fix the flat argument list and the
    variant (plain or atomic updates) the edits were made on."""
    from ...genome import loads
    from ..derivative import DerivativeKernel
    with open(path) as file:
        edits = loads(file.read())
    if isinstance(kernel, DerivativeKernel):
        if activities is None or launch is None:
            raise TypeError("zm.load_variant of a derivative needs the example activities "
                            "and the launch: zm.load_variant(zm.grad(k), path, activities, "
                            "(grid, block))")
        from .derivatives import as_kernel
        kernel = as_kernel(kernel, lambda rng: list(activities), launch, None, None, 0)[0]
    return VariantKernel(kernel, edits)
