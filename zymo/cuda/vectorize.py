"""numba's `@vectorize` and `@guvectorize`: a scalar (or core) function made into a kernel that
applies it over arrays, broadcasting as NumPy does.

Each call resolves the signature from the inputs' dtypes (the first that takes them safely,
as a NumPy ufunc does), broadcasts the inputs (NumPy views with zero strides; GPU arrays as
strided views of the same memory), allocates the outputs unless `out=` gives them, and
launches a kernel generated for that many arguments and dimensions, one thread per output
element (per loop element for a gufunc). Target "cuda" runs where the arrays are (GPU arrays
on the GPU); "cpu" and "parallel" run on zymo's CPU backend.
"""
from __future__ import annotations

import itertools
import linecache
import re
import warnings

import numpy as np

import zymo as zm

_TARGETS = ("cuda", "cpu", "parallel")
_THREADS = 256
_counter = itertools.count()


# ---- signatures --------------------------------------------------------------------------
def _parse_signature(sig) -> tuple[tuple, np.dtype | None]:
    """(input dtypes (with core ndims for gufuncs), output dtype) of "f8(f8, f8)",
    "void(float64[:], float64[:])" or a numba signature object."""
    if isinstance(sig, tuple):                 # (float32[:], float32[:]): the arguments
        return tuple(_dtype_of_type(a) for a in sig), None
    if not isinstance(sig, str):
        args = getattr(sig, "args", None)
        if args is None:
            raise TypeError(f"cannot read the signature {sig!r}")
        ret = getattr(sig, "return_type", None)
        output = None if ret is None or str(ret) in ("void", "none") else _dtype_of_type(ret)[0]
        return tuple(_dtype_of_type(a) for a in args), output
    match = re.fullmatch(r"\s*(\w*)\s*\((.*)\)\s*", sig)   # "(f8, f8[:])": the arguments
    if match is None:
        raise TypeError(f"cannot read the signature {sig!r}: write it as 'float32(float32, "
                        f"float32)'")
    ret, args = match.groups()
    inputs = tuple(_dtype_of(a) for a in _split(args))
    return inputs, None if ret in ("", "void", "none", "None") else _dtype_of(ret)[0]


def _split(text: str) -> list[str]:
    return [part.strip() for part in re.split(r",(?![^\[]*\])", text) if part.strip()]


def _dtype_of_type(t):
    """(dtype, core ndim) of a numba type object: `float32`, or `float32[:, :]` (2)."""
    from .np.numpy_support import as_dtype
    ndim = getattr(t, "ndim", 0) if hasattr(t, "layout") else 0
    return as_dtype(t.dtype if ndim else t), ndim


def _dtype_of(name: str):
    name = name.strip()
    core = name.count(":") if "[" in name else 0
    base = name.split("[")[0].strip()
    return np.dtype(base), core


def _resolve(signatures, dtypes, what: str):
    """The first signature whose inputs take `dtypes` by safe casts."""
    if not signatures:
        common = np.result_type(*dtypes)
        return tuple((common, 0) for _ in dtypes), common
    for inputs, output in signatures:
        if len(inputs) == len(dtypes) and all(
                np.can_cast(d, want, "safe") for d, (want, _) in zip(dtypes, inputs)):
            return inputs, output
    listed = ", ".join(f"({', '.join(str(t) for t, _ in i)})" for i, _ in signatures)
    raise TypeError(f"{what}: no signature takes ({', '.join(map(str, dtypes))}); it has "
                    f"{listed}")


# ---- arrays ------------------------------------------------------------------------------
class _GpuView:
    """A strided view of GPU memory (a broadcast input): what the launch reads through the
    CUDA array interface."""

    def __init__(self, interface: dict, base):
        self.__cuda_array_interface__ = interface
        self.shape = interface["shape"]
        self.base = base   # owns the memory: a scalar copied to the GPU lives as long as this


def _is_gpu(value) -> bool:
    return not isinstance(value, np.ndarray) and hasattr(value, "__cuda_array_interface__")


def _shape(value) -> tuple:
    """An argument's shape: an array's, or a nested sequence's as NumPy reads it
    (a tuple of tuples is 2-d)."""
    return tuple(value.shape) if hasattr(value, "shape") else np.shape(value)


def _padded_output(value, shape: tuple):
    """Output `value` seen with `shape`: its own shape with extent-1 loop dimensions in front
    (a 1-d `out` of a "(x)->(x)" gufunc called on 1-d inputs runs over a loop of one)."""
    own = _shape(value)
    if own == shape:
        return value
    pad = len(shape) - len(own)
    if pad < 0 or shape[pad:] != own or any(n != 1 for n in shape[:pad]):
        raise TypeError(f"an output of shape {own} where the inputs give {shape}")
    if _is_gpu(value):
        interface = value.__cuda_array_interface__
        strides = interface.get("strides") or _c_strides(own, np.dtype(
            interface["typestr"]).itemsize)
        return _GpuView(dict(interface, shape=shape, strides=(0,) * pad + tuple(strides)),
                        value)
    view = value.view()
    view.shape = shape
    return view


def _broadcast(value, shape: tuple, dtype, on_gpu: bool = False):
    """`value` as an array of `shape` and `dtype` (a view where it can be), in GPU memory
    when `on_gpu`."""
    if on_gpu and not _is_gpu(value):
        host = np.asarray(value, dtype)
        value = zm.to_device(host.reshape(host.shape or (1,)))
    if _is_gpu(value):
        interface = value.__cuda_array_interface__
        if np.dtype(interface["typestr"]) != dtype:
            raise TypeError(f"a GPU array of {np.dtype(interface['typestr'])} where the "
                            f"signature takes {dtype}: convert it first")
        own = tuple(interface["shape"])
        if own == (1,) and not _shape(value):
            own = ()
        if own == shape:
            return value
        item = dtype.itemsize
        strides = interface.get("strides") or _c_strides(own, item)
        pad = len(shape) - len(own)
        new = [0] * pad + [0 if n == 1 and m != 1 else s
                           for n, m, s in zip(own, shape[pad:], strides)]
        return _GpuView(dict(interface, shape=shape, strides=tuple(new)), value)
    return np.broadcast_to(np.asarray(value, dtype), shape)


def _c_strides(shape, item: int) -> tuple:
    strides, step = [], item
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _allocate(shape, dtype, device: bool):
    """A result: a device array (zymo.cuda's: on the GPU, or in host memory without one) when
    the inputs were device arrays, else a NumPy array, as numba's ufuncs give."""
    from .cudadrv.devicearray import device_array
    return device_array(shape, dtype) if device else np.empty(shape, dtype)


def _is_device(value) -> bool:
    return _is_gpu(value) or getattr(type(value), "zymo_by_reference", False)


# ---- generated kernels ---------------------------------------------------------------------
def _kernel_from_source(name: str, source: str, namespace: dict):
    """A kernel defined by `source` (kept in linecache, so that the frontend can read it)."""
    filename = f"<zymo {name} {next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return zm.kernel(namespace[name])


def _unravel(ndim: int, total: str, shape_of: str) -> list[str]:
    """Lines that set c0..c{ndim-1} from the flat thread index `i` over `shape_of`'s shape."""
    if ndim == 0:
        return []
    lines = ["        r = i"]
    for axis in range(ndim - 1, 0, -1):
        lines.append(f"        c{axis} = r % {shape_of}.shape[{axis}]")
        lines.append(f"        r = r // {shape_of}.shape[{axis}]")
    lines.append("        c0 = r")
    return lines


class _Generated:
    """Kernels generated for one core function, by (argument kinds, dimensions)."""

    def __init__(self, core):
        self.core = zm.func(getattr(core, "py_func", core))
        self.kernels: dict = {}

    def get(self, key, make_source):
        kernel = self.kernels.get(key)
        if kernel is None:
            source = make_source()
            kernel = self.kernels[key] = _kernel_from_source(
                "vectorized", source, {"zm": zm, "core": self.core})
        return kernel


# ---- vectorize -----------------------------------------------------------------------------
class UFunc:
    """A scalar function applied element by element over broadcast arrays."""

    def __init__(self, py_func, signatures, target: str):
        self.py_func = py_func
        self.__name__ = getattr(py_func, "__name__", "ufunc")
        self.signatures = [_parse_signature(s) for s in signatures]
        self.target = target
        self.generated = _Generated(py_func)
        self._results: dict = {}     # argument dtypes -> result dtype, without signatures

    def __call__(self, *args, out=None, stream=0):
        args, out = _imported(args, out)
        dtypes = [np.dtype(a.__cuda_array_interface__["typestr"]) if _is_gpu(a)
                  else np.asarray(a).dtype for a in args]
        if self.signatures:
            inputs, output = _resolve(self.signatures, dtypes, self.__name__)
        else:   # as numba: compiled for the arguments' own types, returning what it returns
            inputs, output = tuple((d, 0) for d in dtypes), self._result_dtype(tuple(dtypes))
        if output is None:     # argument types only: returning what the function returns
            output = self._result_dtype(tuple(dtype for dtype, _ in inputs))
        shape = np.broadcast_shapes(*[_shape(a) for a in args],
                                    *([_shape(out)] if out is not None else []))
        on_gpu = self.target == "cuda" and any(_is_gpu(a) for a in (*args, out))
        scalar_result = shape == () and out is None
        if shape == ():
            shape = (1,)
        arrays = [_broadcast(a, shape, dtype, on_gpu) for a, (dtype, _) in zip(args, inputs)]
        device = on_gpu or self.target == "cuda" and any(_is_device(a) for a in args)
        result = out if out is not None else _allocate(shape, output, device)
        ndim = len(shape)
        names = [f"a{k}" for k in range(len(args))]
        index = ", ".join(f"c{axis}" for axis in range(ndim))

        def source():
            lines = [f"def vectorized({', '.join(names)}, out):",
                     "    i = zm.grid(1)",
                     "    if i < out.size:",
                     *_unravel(ndim, "out.size", "out"),
                     f"        out[{index}] = core({', '.join(f'{n}[{index}]' for n in names)})"]
            return "\n".join(lines) + "\n"

        kernel = self.generated.get((len(args), ndim), source)
        if self.target != "cuda" and not on_gpu:
            kernel = kernel.on("cpu")
        size = int(np.prod(shape))
        blocks = max(1, -(-size // _THREADS))
        if self.target == "cuda":
            _warn_if_low_occupancy(blocks)
        kernel[blocks, _THREADS](*arrays, result)
        if scalar_result:
            return result[0] if isinstance(result, np.ndarray) else result.copy_to_host()[0]
        return result

    def reduce(self, array, axis: int = 0, stream=0):
        """numba's `ufunc.reduce` of a binary ufunc along axis 0: a tree of launches, each
        combining the two halves of what is left (an odd element out folded into the
        first), in device memory for target "cuda" (a host array is copied in once; a
        device array is read, not written). A 1-d array gives a NumPy scalar; more
        dimensions an array (a device array for a device array)."""
        if axis != 0:
            raise NotImplementedError(f"{self.__name__}.reduce reduces along axis 0, not "
                                      f"{axis}: move the axis first (np.moveaxis)")
        if any(len(inputs) != 2 for inputs, _ in self.signatures):
            raise TypeError(f"{self.__name__}.reduce needs a binary ufunc (two inputs)")
        device = _is_device(array)
        if not device and not _is_gpu(array):
            array = np.asarray(array)
        shape = _shape(array)
        if not shape:
            raise TypeError(f"{self.__name__}.reduce of a 0-d value: pass an array")
        n = shape[0]
        if n == 0:
            raise TypeError(f"{self.__name__}.reduce on an empty array: this ufunc has no "
                            f"identity to start from")
        work = array
        if self.target == "cuda" and not device:
            from .cudadrv.devicearray import to_device
            work = to_device(array, stream=stream)
        fresh = False   # whether `work` is scratch this reduction may overwrite
        while n > 1:
            half = n // 2
            left, right, rest = work[:half], work[half:2 * half], work[2 * half:n]
            if fresh:
                self(left, right, out=left, stream=stream)
            else:   # the first step writes a new array: the argument stays as it was
                work, fresh = self(left, right, stream=stream), True
            if n % 2:
                self(work[:1], rest, out=work[:1], stream=stream)
            n = half
        if stream:
            stream.synchronize()
        if len(shape) > 1:
            result = work[0]
            return result if device else _to_host(result)
        return _to_host(work[:1])[0]

    def _result_dtype(self, dtypes: tuple) -> np.dtype:
        """The dtype the scalar function returns for arguments of `dtypes`."""
        found = self._results.get(dtypes)
        if found is None:
            from ..frontend import Param, result_types
            from ..ir.types import scalar_of_dtype
            py_func = getattr(self.py_func, "py_func", self.py_func)
            outputs = result_types(py_func, [Param("value", scalar_of_dtype(d))
                                             for d in dtypes])
            if len(outputs) != 1:
                raise TypeError(f"{self.__name__}: a vectorized function returns one number")
            found = self._results[dtypes] = outputs[0].dtype
        return found

    def __repr__(self) -> str:
        return f"<zymo vectorize {self.__name__} target={self.target}>"


def _to_host(value) -> np.ndarray:
    copy = getattr(value, "copy_to_host", None)
    return copy() if copy is not None else np.asarray(value)


def vectorize(signatures=(), target: str = "cpu", **options):
    """`@vectorize(["float32(float32, float32)"], target="cuda")`: see UFunc."""
    _check_target(target)
    if target == "cuda":
        _check_vectorize_options(options)
    if callable(signatures) and not isinstance(signatures, (list, tuple, str)):
        return UFunc(signatures, (), target)
    if isinstance(signatures, str):
        signatures = [signatures]
    return lambda fn: UFunc(fn, list(signatures), target)


def _check_vectorize_options(options: dict) -> None:
    """numba's options for a cuda ufunc: `identity`, `cache` (False); `nopython` is
    redundant; others are a KeyError."""
    for name, value in options.items():
        if name == "nopython":
            warnings.warn("nopython kwarg for cuda target is redundant: cuda ufuncs are always "
                          "compiled", RuntimeWarning, stacklevel=3)
        elif name == "cache" and value:
            raise TypeError("caching is not supported for cuda ufuncs: drop cache=True")
        elif name not in ("identity", "cache"):
            raise KeyError(f"Unrecognized options. cuda vectorize target does not support "
                           f"option {name!r}; it takes identity and nopython")


def _check_guvectorize_options(options: dict) -> None:
    """numba's options for a cuda gufunc: `identity`, `nopython` (True), `cache` (False),
    `writable_args` (none); the messages are numba's, which code may match exactly."""
    options = dict(options)
    options.pop("identity", None)
    if options.pop("cache", False):
        raise TypeError("caching is not supported")
    if options.pop("writable_args", ()):
        raise TypeError("writable_args are not supported")
    if not options.pop("nopython", True):
        raise TypeError("nopython flag must be True")
    if options:
        raise TypeError(f"The following target options are not supported: "
                        f"{', '.join(map(repr, options))}")


# ---- guvectorize ---------------------------------------------------------------------------
def _parse_layout(layout: str) -> tuple[list[tuple], list[tuple]]:
    """"(n),()->(n)" as ([("n",), ()], [("n",)])."""
    def groups(text):
        return [tuple(d.strip() for d in g.split(",") if d.strip())
                for g in re.findall(r"\(([^)]*)\)", text)]
    if "->" not in layout:
        raise TypeError(f"gufunc layout {layout!r} has no '->'")
    left, right = layout.split("->")
    return groups(left), groups(right)


class Schedule:
    """How a gufunc call runs: `sizes` of the core dimensions by name, `loopdims` (the
    broadcast loop shape), the core shapes of the inputs (`ishapes`) and outputs (`oshapes`),
    and which inputs are `pinned` (broadcast over loop dimensions they lack)."""

    def __init__(self, sizes, loopdims, ishapes, oshapes, pinned):
        self.sizes, self.loopdims = sizes, loopdims
        self.ishapes, self.oshapes, self.pinned = ishapes, oshapes, pinned


def schedule(ins, outs, in_shapes, out_shapes=(), name: str = "gufunc") -> Schedule:
    """The schedule of a gufunc with core dimensions `ins` -> `outs` (tuples of names) for
    arguments of `in_shapes` (and given outputs of `out_shapes`)."""
    sizes: dict[str, int] = {}
    loops = []
    for shape, dims in zip(in_shapes, ins):
        if len(shape) < len(dims):
            raise TypeError(f"{name}: an input of shape {shape} for core dimensions "
                            f"({', '.join(dims)})")
        core = shape[len(shape) - len(dims):]
        for dim, extent in zip(dims, core):
            if sizes.setdefault(dim, extent) != extent:
                raise TypeError(f"{name}: core dimension {dim} is both {sizes[dim]} and "
                                f"{extent}")
        loops.append(tuple(shape[:len(shape) - len(dims)]))
    out_loops = []
    for shape, dims in zip(out_shapes, outs):
        for dim, extent in zip(dims, shape[len(shape) - len(dims):]):
            sizes.setdefault(dim, extent)
        out_loops.append(tuple(shape[:len(shape) - len(dims)]))
    loopdims = tuple(np.broadcast_shapes(*loops, *out_loops))
    size = int(np.prod(loopdims))
    pinned = [int(np.prod(loop)) != size for loop in loops]
    return Schedule(sizes, loopdims, [tuple(sizes[d] for d in dims) for dims in ins],
                    [tuple(sizes[d] for d in dims if d in sizes) for dims in outs], pinned)


class GUFunc:
    """A core function over the core dimensions of its arguments, applied over the loop
    dimensions in front of them (broadcast), one thread per loop element."""

    def __init__(self, py_func, signatures, layout: str, target: str):
        self.py_func = py_func
        self.__name__ = getattr(py_func, "__name__", "gufunc")
        self.signatures = [_parse_signature(s) for s in signatures]
        for sig, (_, output) in zip(signatures, self.signatures):
            if output is not None:
                raise TypeError(f"{self.__name__}: guvectorized functions cannot return "
                                f"values: signature {sig} specifies {_return_name(sig)} "
                                f"return type; write void(...) and store results in the "
                                f"output arguments")
        self.ins, self.outs = _parse_layout(layout)
        self.target = target
        self.generated = _Generated(py_func)

    def _arguments(self, args, out) -> tuple[list, list]:
        """(inputs, given outputs) of a call, as numba's gufuncs take them: the inputs, then
        optionally the outputs, positionally; or the outputs as `out=`."""
        n_in, n_out = len(self.ins), len(self.outs)
        if out is None and len(args) not in (n_in, n_in + n_out):
            def count(n):
                return f"{n} positional argument{'s' * (n != 1)}"
            raise TypeError(f"{self.__name__}: this gufunc accepts {count(n_in)} (the inputs) "
                            f"or {count(n_in + n_out)} (the inputs and outputs). Got "
                            f"{count(len(args))}.")
        if out is not None and len(args) > n_in:
            raise ValueError("cannot specify argument 'out' as both positional and keyword")
        if out is None:
            return list(args[:n_in]), list(args[n_in:])
        return list(args), list(out) if isinstance(out, tuple) else [out]

    def _signature(self, args) -> tuple:
        """The declared (dtype, ndim) of each argument, for the inputs `args`; host inputs
        of other dtypes are converted to it (device arrays must match)."""
        n_in = len(self.ins)
        dtypes = [_dtype_of_value(a) for a in args]
        if not self.signatures:
            common = np.result_type(*dtypes)
            return ((common, len(d)) for d in self.ins + self.outs)
        for accepts in (lambda d, want: d == want,                    # exact
                        lambda d, want: np.can_cast(d, want, "safe"),   # as NumPy converts
                        lambda d, want: np.can_cast(want, d, "safe")):  # narrowed, as numba
            for inputs, _ in self.signatures:
                if len(inputs) >= n_in and all(
                        accepts(d, want) for d, (want, _) in zip(dtypes, inputs)):
                    return inputs
        listed = ", ".join(f"({', '.join(str(t) for t, _ in i[:n_in])})"
                           for i, _ in self.signatures)
        raise TypeError(f"{self.__name__}: no signature takes "
                        f"({', '.join(map(str, dtypes))}); it has {listed}")

    def __call__(self, *args, out=None, stream=0):
        n_in, n_out = len(self.ins), len(self.outs)
        args, outs = self._arguments(args, out)
        args, outs = _imported(args, outs)
        declared = tuple(self._signature(args))
        inputs = declared[:n_in]
        out_types = [dtype for dtype, _ in declared[n_in:]]
        args = [_cast(a, dtype, self.__name__) for a, (dtype, _) in zip(args, inputs)]
        plan = schedule(self.ins, self.outs, [_shape(a) for a in args],
                        [_shape(o) for o in outs], self.__name__)
        sizes, loop = plan.sizes, plan.loopdims or (1,)
        on_gpu = self.target == "cuda" and any(_is_gpu(a) for a in (*args, *outs))
        arrays = []
        for value, dims, (dtype, _) in zip(args, self.ins, inputs):
            core = tuple(sizes[d] for d in dims)
            arrays.append(_broadcast(value, loop + core, dtype, on_gpu))
        if not outs:   # numba's shapes: the loop dimensions (none for one call) and the core
            for dims, dtype in zip(self.outs, out_types):
                missing = [d for d in dims if d not in sizes]
                if missing:
                    raise TypeError(f"{self.__name__}: output dimension {missing[0]} is not "
                                    f"set by any input: pass out=")
                device = on_gpu or self.target == "cuda" and any(_is_device(a) for a in args)
                outs.append(_allocate(plan.loopdims + tuple(sizes[d] for d in dims), dtype,
                                      device))
        given = list(outs)
        outs = [_padded_output(value, loop + tuple(sizes[d] for d in dims))
                for value, dims in zip(outs, self.outs)]
        ndim = len(loop)
        index = [f"c{axis}" for axis in range(ndim)]
        # a core argument the layout calls a scalar "()" but the signature an array (numba's
        # old-style gufuncs, and every output): a one-element view, else the element
        as_array = [not dims and (k >= n_in or declared[k][1] > 0)
                    for k, dims in enumerate(self.ins + self.outs)]

        def argument(name, k):
            if as_array[k]:
                return f"{name}[{', '.join(index[:-1] + [f'{index[-1]}:{index[-1]} + 1'])}]"
            return f"{name}[{', '.join(index)}]"   # a scalar's value or the core's view

        names = [f"a{k}" for k in range(n_in)] + [f"o{k}" for k in range(n_out)]

        def source():
            call = ", ".join(argument(name, k) for k, name in enumerate(names))
            lines = [f"def vectorized({', '.join(names)}, loop):",
                     "    i = zm.grid(1)",
                     "    if i < loop.size:",
                     *_unravel(ndim, "loop.size", "loop"),
                     f"        core({call})"]
            return "\n".join(lines) + "\n"

        key = (tuple(self.ins), tuple(self.outs), ndim, tuple(as_array))
        kernel = self.generated.get(key, source)
        if self.target != "cuda" and not on_gpu:
            kernel = kernel.on("cpu")
        size = int(np.prod(loop))
        shape_carrier = np.broadcast_to(np.zeros(1, np.int8), loop)   # its shape: the loop's
        if on_gpu:
            shape_carrier = _GpuView({"shape": loop, "typestr": "|i1", "version": 3,
                                      "data": (_gpu_pointer(arrays + outs), False),
                                      "strides": (0,) * ndim}, arrays)
        blocks = max(1, -(-size // _THREADS))
        if self.target == "cuda":
            _warn_if_low_occupancy(blocks)
        kernel[blocks, _THREADS](*arrays, *outs, shape_carrier)
        return given[0] if n_out == 1 else tuple(given)

    def __repr__(self) -> str:
        return f"<zymo guvectorize {self.__name__} target={self.target}>"


def _imported(args, out):
    """Arguments and outputs (one, a tuple, a list or None) with other libraries' arrays
    viewed as zymo.cuda device arrays, as numba's ufuncs take them (their streams
    synchronized; results are device arrays)."""
    from .cudadrv.devicearray import import_foreign_arrays
    args = import_foreign_arrays(args)
    if isinstance(out, (list, tuple)):
        return args, type(out)(import_foreign_arrays(out))
    return args, out if out is None else import_foreign_arrays([out])[0]


def _dtype_of_value(value) -> np.dtype:
    if _is_gpu(value):
        return np.dtype(value.__cuda_array_interface__["typestr"])
    return np.asarray(value).dtype


def _cast(value, dtype, name: str):
    """A gufunc input as the signature's `dtype`: host values converted (numba's
    `astype`), device arrays as they are (they must match)."""
    if _dtype_of_value(value) == dtype:
        return value
    if _is_device(value):
        raise TypeError(f"{name}: a device array of {_dtype_of_value(value)} where the "
                        f"signature takes {dtype}: a compatible signature is possible by "
                        f"casting but {type(value).__name__} does not support .astype() "
                        f"here; convert it first (copy_to_host().astype(...))")
    return np.asarray(value).astype(dtype)


def _return_name(sig) -> str:
    if isinstance(sig, str):
        return sig.split("(")[0].strip()
    return str(getattr(sig, "return_type", sig))


def _warn_if_low_occupancy(blocks: int) -> None:
    from .core import config
    if config.performance_warnings("CUDA_LOW_OCCUPANCY_WARNINGS"):
        from ..runtime.cuda.launch import warn_low_occupancy
        warn_low_occupancy(blocks, stacklevel=4)


def _gpu_pointer(values) -> int:
    for value in values:
        if _is_gpu(value):
            return value.__cuda_array_interface__["data"][0]
    return 0


def guvectorize(signatures, layout: str, target: str = "cpu", **options):
    """`@guvectorize(["void(float64[:], float64[:])"], "(n)->(n)", target="cuda")`."""
    if isinstance(signatures, str):
        signatures = [signatures]
    _check_target(target)
    if target == "cuda":
        _check_guvectorize_options(options)
    return lambda fn: GUFunc(fn, list(signatures), layout, target)


def _check_target(target: str) -> None:
    if target not in _TARGETS:
        raise ValueError(f"target {target!r}: choose one of {', '.join(_TARGETS)}")
