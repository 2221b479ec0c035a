"""numba's `numba.core` names that code written for numba.cuda imports: `config` (its flags)
and `errors` (its exception and warning classes); `bytecode` and `controlflow` (numba's
bytecode reader and control-flow graph analysis) for code that analyses Python functions with
them. numba's other compiler internals (`ir`, the passes) have no counterpart: zymo compiles
from source through its own IR, and does not use `bytecode` or `controlflow` itself."""
from . import config, errors  # noqa: F401
