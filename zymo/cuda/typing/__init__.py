"""numba's `numba.core.typing` names code for numba.cuda imports: `signature` and `typeof`."""
from ..types import Signature
from .typeof import typeof  # noqa: F401


def signature(return_type, *args) -> Signature:
    """The signature `return_type(*args)` (numba's `typing.signature`)."""
    return Signature(return_type, tuple(args))
