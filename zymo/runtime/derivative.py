"""What `zm.grad(kernel)` and `zm.jvp(kernel)` share: launched like the kernel with activities,
specialized lazily per (activities, argument types, variant), inspectable like a kernel."""
from __future__ import annotations

from ..diagnostics import LaunchError
from .compile import Job
from .kernel import Kernel, Specialization, normalize_dims


class DerivativeKernel:
    """A derivative of a kernel; `dk[grid, block](*activities)` launches it."""

    mode = ""             # "grad" or "jvp"
    example = ""          # activities for the messages, e.g. "zm.Duplicated(x, dx)"

    def __init__(self, kernel: Kernel):
        if not isinstance(kernel, Kernel):
            raise TypeError(f"zm.{self.mode} takes a @zm.kernel (device functions: "
                            f"zm.{self.mode}(f) inside a kernel), not {kernel!r}")
        self.kernel = kernel
        self._specs: dict = kernel._derived.setdefault(self.family(), {})
        self.last = None

    def family(self) -> tuple:
        """What, besides the kernel, tells this derivative's specializations from another's
        (its class; forward mode adds its width)."""
        return (type(self).__name__,)

    @property
    def __name__(self) -> str:
        return f"{self.mode}({self.kernel.__name__})"

    def _view(self, kernel: Kernel) -> "DerivativeKernel":
        raise NotImplementedError

    def on(self, backend: str) -> "DerivativeKernel":
        view = self._view(self.kernel.on(backend))
        view._specs = self._specs
        return view

    def __getitem__(self, config):
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise LaunchError(f"launch as {self.mode}(kernel)[grid, block] or [grid, block, "
                              f"stream, shared_bytes]")
        grid = normalize_dims(config[0], "grid")
        block = normalize_dims(config[1], "block")
        stream = config[2] if len(config) > 2 else None
        shared = int(config[3]) if len(config) > 3 else 0
        return self._launcher(grid, block, shared, stream)

    def _launcher(self, grid, block, shared, stream):
        raise NotImplementedError

    def _cached(self, key, make):
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = make()
        self.last = spec
        return spec

    def show(self, *types_or_args, file=None) -> str:
        """Print (and return) the derivative's IR, for these activities or the last launch."""
        spec = self.specialize(*types_or_args) if types_or_args else self.last
        if spec is None:
            raise LaunchError(f"{self.__name__}.show(): pass the argument activities, e.g. "
                              f".show({self.example}), or launch first")
        text = spec.ir()
        interleaved = getattr(spec, "interleaved", ())
        if interleaved:   # their adjoints sit inside the forward loop: say so
            text = "".join(f"// the loop at {loc} is reversed one iteration at a time, inside "
                           f"the forward sweep\n" for loc in interleaved) + text
        consume = getattr(spec, "consume", None)
        if consume is not None:   # a gathering derivative launches a second kernel
            text += ("\n// then, with the same arguments, the kernel that consumes the output "
                     "cotangents:\n" + consume.ir())
        print(text, file=file)
        return text

    def specialize(self, *types_or_args):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<zymo {self.__name__}>"


class DerivativeSpecialization(Specialization):
    """A derivative's signature: `kinds` says what each argument carries; `extras(kind)` how
    many parameters (shadows, tangents) follow its own. The compile driver derives its IR from
    that of `primal`, the kernel's specialization for the arguments alone (`derive`)."""

    def __init__(self, kernel: Kernel, kinds, params, extras):
        Job.__init__(self, kernel, params)
        self.kinds, self.extras, primal, position = kinds, [], [], 0
        for kind in kinds:
            count = extras(kind)
            primal.append(params[position])
            self.extras.append(params[position + 1:position + 1 + count])
            position += 1 + count
        self.primal = kernel.specialization(tuple(primal))


def run_with_consumer(spec, backend: str, grid, block, args, shared: int, stream) -> None:
    """A reverse-mode derivative's launch, then that of the kernel consuming its output
    cotangents where it has one (a gathering derivative: `zymo.ad.gather`)."""
    run_specialization(spec, backend, grid, block, args, shared, stream)
    if spec.consume is not None:
        spec.consume.run(backend, grid, block, args, shared, stream)


def run_specialization(spec, backend: str, grid, block, args, shared: int, stream) -> None:
    if backend == "cuda":
        spec.compiled("cuda").launch(grid, block, args, shared, stream)
    else:
        spec.launch(backend, grid, block, args, shared)
