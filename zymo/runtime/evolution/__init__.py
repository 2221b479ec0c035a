"""Evolution joined to the runtime: variants compiled and launched, evaluated in isolated
workers, searched (`evolve`), analysed and reported. The genome itself is `zymo.evolve`."""
from .evaluate import Fitness, default_check  # noqa: F401
from .search import EvolveResult, evolve  # noqa: F401
from .variant import VariantKernel  # noqa: F401
from .workers import EvaluationTimeout, IsolatedPool, WorkerCrashed  # noqa: F401


def load_variant(kernel, path) -> VariantKernel:
    """The variant of `kernel` whose edit list was saved at `path` (`variant.save(path)`)."""
    from ...evolve import loads
    with open(path) as file:
        return VariantKernel(kernel, loads(file.read()))
