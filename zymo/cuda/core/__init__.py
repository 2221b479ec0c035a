"""numba's `numba.core` names that code written for numba.cuda imports: `config` (its flags)
and `errors` (its exception and warning classes). numba's compiler internals (`ir`,
`bytecode`, the passes) have no counterpart: zymo compiles from source through its own IR."""
from . import config, errors  # noqa: F401
