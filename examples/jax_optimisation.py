"""Fitting a model whose forward pass is a zymo kernel, with JAX and plain gradient descent.

The model is a peak on a baseline, `a * exp(-(t - c)^2 / (2 s^2)) + b`, evaluated by one kernel
(one thread per sample). `zm.jax.function` makes the kernel a JAX function: under `jax.jit`
it runs inside the compiled XLA program as a custom call, and `jax.grad` through it launches
the kernel's `zm.grad` derivative (another custom call), so the whole training step is one
compiled program with no Python in it. On a GPU (jax[cuda]) the same code runs there, on
XLA's stream.

    python examples/jax_optimisation.py
"""
import jax
import jax.numpy as jnp
import numpy as np

import zymo as zm


@zm.kernel
def peak(t, params, y):
    i = zm.grid(1)
    if i < t.shape[0]:
        a, c, s, b = params[0], params[1], params[2], params[3]
        d = (t[i] - c) / s
        y[i] = a * zm.math.exp(-0.5 * d * d) + b


model = zm.jax.function(peak, lambda t, params: ((t.shape[0] + 127) // 128, 128),
                        outputs={"y": "t"})


def loss(params, t, data):
    return jnp.mean((model(t, params) - data) ** 2)


@jax.jit
def step(params, t, data, rate):
    value, grad = jax.value_and_grad(loss)(params, t, data)
    return params - rate * grad, value


def main() -> None:
    rng = np.random.default_rng(0)
    t = np.linspace(-4.0, 4.0, 2000, dtype=np.float32)
    truth = np.array([2.0, 0.7, 0.9, 0.3], np.float32)
    data = (truth[0] * np.exp(-0.5 * ((t - truth[1]) / truth[2]) ** 2) + truth[3]
            + 0.02 * rng.standard_normal(t.shape)).astype(np.float32)
    params = jnp.array([1.0, 0.0, 1.5, 0.0], jnp.float32)
    first = None
    for iteration in range(600):
        params, value = step(params, t, data, 0.5)
        first = float(value) if first is None else first
        if iteration % 100 == 0:
            print(f"step {iteration:4d}  loss {float(value):.6f}")
    fitted = np.asarray(params)
    print("fitted a, c, s, b =", np.round(fitted, 3), " true:", truth)
    print(f"loss {first:.4f} -> {float(loss(params, t, data)):.6f}")
    assert np.allclose(fitted, truth, atol=0.05), "the fit did not converge"


if __name__ == "__main__":
    main()
