"""What `zm.torch.function` and `zm.jax.function` check of their arguments alike: a kernel, a
launch function, outputs and scalars that name the kernel's parameters."""
from __future__ import annotations

import inspect

import zymo as zm

SCALAR_TYPES = (float, int, bool)


def parameters(where: str, kernel, launch, outputs, scalars, example: str, output,
               noun: str) -> tuple:
    """(the kernel's parameter names, {scalar name: its type}, {output name: `output`
    instance}, the call's arguments (parameters less outputs), the positions among them of
    the arrays), or a TypeError that says what to write. `where` names the caller
    (`zm.torch.function`), `example` a launch it may take, `output` the caller's Output class,
    `noun` what its arrays are called ("tensor")."""
    if not isinstance(kernel, zm.Kernel):
        raise TypeError(f"{where} takes a @zm.kernel, not {kernel!r}")
    if not callable(launch):
        raise TypeError(f"{where}: launch must be a function of the call's arguments "
                        f"returning (grid, block), e.g. {example}")
    params = list(inspect.signature(kernel.py_func).parameters)
    if isinstance(outputs, (list, tuple, str)) or not outputs:
        raise TypeError(f"{where}: outputs is a dict {{parameter: Output(...)}} naming at "
                        f"least one parameter the kernel writes, e.g. outputs={{'y': 'x'}} "
                        f"for a y shaped like x")
    scalars = dict(scalars) if isinstance(scalars, dict) else {s: float for s in scalars}
    for what, names in (("output", outputs), ("scalar", scalars)):
        for item in names:
            if item not in params:
                raise TypeError(f"{where}: {what} {item!r} is not a parameter of "
                                f"{kernel.__name__}({', '.join(params)})")
    for item, kind in scalars.items():
        if kind not in SCALAR_TYPES:
            raise TypeError(f"{where}: scalar {item!r} is float, int or bool, not {kind!r}")
    outputs = {k: v if isinstance(v, output) else output(v) for k, v in outputs.items()}
    arguments = [p for p in params if p not in outputs]
    arrays = [i for i, p in enumerate(arguments) if p not in scalars]
    for out in outputs.values():
        if isinstance(out.shape, str) and out.shape not in [arguments[i] for i in arrays]:
            raise TypeError(f"{where}: an output shaped like {out.shape!r} names no {noun} "
                            f"argument of {kernel.__name__}")
    return params, scalars, outputs, arguments, arrays
