"""Kernels with exactly one mistake each; the line holding it ends with `# E: <message>`."""
import numpy as np

import zymo as zm

TABLE = np.arange(4, dtype=np.float32)


@zm.kernel
def list_literal(x):
    values = [1.0, 2.0]  # E: unsupported expression in a kernel: list literal
    x[0] = values[0]


@zm.kernel
def dict_literal(x):
    d = {}  # E: unsupported expression in a kernel: dict literal
    x[0] = 1.0


@zm.kernel
def comprehension(x):
    s = sum([v for v in range(3)])  # E: unsupported expression in a kernel: list comprehension
    x[0] = s


@zm.kernel
def try_statement(x):
    try:  # E: unsupported statement in a kernel: try/except
        x[0] = 1.0
    except IndexError:
        pass


@zm.kernel
def with_statement(x):
    with open("log"):  # E: unsupported statement in a kernel: with
        x[0] = 1.0


@zm.kernel
def raise_statement(x):
    raise 3  # E: cannot raise the constant 3


@zm.kernel
def nested_def(x):
    def helper(v):  # E: unsupported statement in a kernel: nested function definition
        return v
    x[0] = 1.0


@zm.kernel
def lambda_expr(x):
    f = lambda v: v  # E: unsupported expression in a kernel: lambda
    x[0] = 1.0


@zm.kernel
def string_value(x):
    x[0] = "text"  # E: cannot store the Python object 'text' in an array of f32


@zm.kernel
def slicing(x):
    y = x[::x.shape[0]]  # E: a slice step must be a non-zero integer known at compile time
    y[0] = 1.0


@zm.kernel
def undefined_name(x):
    x[0] = not_defined_anywhere  # E: name 'not_defined_anywhere' is not defined


@zm.kernel
def maybe_undefined(x):
    i = zm.grid(1)
    if i > 2:
        v = 1.0
    x[i] = v  # E: 'v' may be undefined here: it is assigned on only one path of an if


@zm.kernel
def wrong_rank(x):
    x[0, 1] = 1.0  # E: 1-d array indexed with 2 indices


@zm.kernel
def float_index(x):
    x[1.5] = 1.0  # E: array index must be an integer, not 1.5


@zm.kernel
def kernel_returns_value(x):
    return x[0]  # E: a kernel cannot return a value


@zm.kernel
def iterate_number(x):
    for v in x[1]:  # E: cannot iterate over a value of type f32
        x[0] = v


@zm.kernel
def shared_dynamic_shape(x):
    n = x.shape[0]
    s = zm.shared.array(n, zm.f32)  # E: array shape must be known at compile time
    s[0] = 1.0


@zm.kernel
def int_pow_runtime(x, k):
    x[0] = k ** k  # E: integer power with a run-time or large exponent


@zm.kernel
def is_operator(x):
    if x[0] is x[1]:  # E: unsupported comparison is
        x[0] = 1.0


@zm.func
def recursive(n):
    return recursive(n - 1)  # E: cannot type infer runaway recursion


@zm.kernel
def calls_recursive(x):
    x[0] = recursive(x[1])


@zm.kernel
def tuple_item_assignment(x):
    t = (1.0, 2.0)
    t[0] = 3.0  # E: tuples cannot be changed
    x[0] = t[0]


@zm.kernel
def range_float(x):
    for i in range(2.5):  # E: range bound must be an integer
        x[0] = 1.0


@zm.kernel
def bad_intrinsic_arity(x):
    zm.atomic.add(x, 0)  # E: zm.atomic.add takes 3 arguments, got 2


@zm.kernel
def shift_float(x):
    x[0] = x[1] << 2  # E: shift of a float


@zm.kernel
def const_store(x):
    c = zm.const.array_like(TABLE)
    c[0] = 1.0  # E: constant arrays are read-only
    x[0] = c[0]


@zm.kernel
def many_errors(x):
    a = [1]  # E: unsupported expression in a kernel: list literal
    b = {1}  # E: unsupported expression in a kernel: set literal
    x[0] = nowhere  # E: name 'nowhere' is not defined
