"""zm.torch.function: zymo kernels as PyTorch operators on CPU tensors: values against PyTorch,
gradients by torch.autograd.gradcheck (float64 finite differences), forward mode through
torch.func.jvp, torch.compile(fullgraph=True) with no graph break, and a training loop."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import zymo as zm  # noqa: E402
from interop.kernels import dense_tanh, polar, scaled_sine, smooth, sum_of_squares  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# torch.library.opcheck scripts a test operator with torch.jit, which warns of its deprecation
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")


def _blocks(n, threads=64):
    return ((n + threads - 1) // threads, threads)


sine_op = zm.torch.function(scaled_sine, lambda x, a: _blocks(x.shape[0]), outputs={"y": "x"},
                            scalars=["a"])
squares_op = zm.torch.function(sum_of_squares, lambda x, w: _blocks(x.shape[0]),
                               outputs={"total": zm.torch.Output((1,))})
smooth_op = zm.torch.function(smooth, lambda x, w: _blocks(x.shape[0]), outputs={"y": "x"})
polar_op = zm.torch.function(polar, lambda x, y: _blocks(x.shape[0]),
                             outputs={"r2": "x", "q": "x"})
dense_op = zm.torch.function(
    dense_tanh, lambda x, w, b: (((x.shape[0] + 7) // 8, (w.shape[1] + 7) // 8), (8, 8)),
    outputs={"y": lambda x, w, b: (x.shape[0], w.shape[1])})


def _rand(*shape, grad=True, seed=0):
    generator = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, dtype=torch.float64, generator=generator).requires_grad_(grad)


def _dense_reference(x, w, b):
    return torch.tanh(x @ w + b)


def test_values_match_pytorch_and_inputs_are_untouched():
    x, w = _rand(37), _rand(3, seed=1)
    before = x.detach().clone()
    torch.testing.assert_close(sine_op(x, 1.5), 1.5 * torch.sin(x) * x)
    torch.testing.assert_close(squares_op(x, x), (x ** 3).sum().reshape(1))
    y = smooth_op(x, w)
    want = x.clone()
    want[1:-1] = w[0] * x[:-2] + w[1] * x[1:-1] + w[2] * x[2:]
    torch.testing.assert_close(y, want)
    r2, q = polar_op(x, w[:1].expand(37).contiguous())
    torch.testing.assert_close(r2, x * x + w[0] ** 2)
    torch.testing.assert_close(q, x * w[0] - w[0])
    xs, ws, bs = _rand(5, 4), _rand(4, 3, seed=1), _rand(3, seed=2)
    torch.testing.assert_close(dense_op(xs, ws, bs), _dense_reference(xs, ws, bs))
    assert torch.equal(x.detach(), before)
    assert dense_op.op.name() == f"zymo::{dense_op.name}"


@pytest.mark.parametrize("case", ["elementwise", "atomics", "stencil", "two_outputs", "dense"])
def test_gradcheck(case):
    if case == "elementwise":
        args = (_rand(41),)
        fn = lambda x: sine_op(x, 0.7)   # noqa: E731
    elif case == "atomics":
        args, fn = (_rand(70), _rand(70, seed=3)), squares_op
    elif case == "stencil":
        args, fn = (_rand(50), _rand(3, seed=4)), smooth_op
    elif case == "two_outputs":
        args, fn = (_rand(33), _rand(33, seed=5)), polar_op
    else:
        args, fn = (_rand(6, 5), _rand(5, 4, seed=6), _rand(4, seed=7)), dense_op
    assert torch.autograd.gradcheck(fn, args)


def test_gradient_of_some_inputs_only_matches_pytorch():
    x, w, b = _rand(6, 5, grad=False), _rand(5, 4, seed=1), _rand(4, grad=False, seed=2)
    dense_op(x, w, b).square().sum().backward()
    w_ref = w.detach().clone().requires_grad_(True)
    _dense_reference(x, w_ref, b).square().sum().backward()
    torch.testing.assert_close(w.grad, w_ref.grad)
    assert x.grad is None and b.grad is None


def test_the_registered_operator_is_differentiable_and_passes_opcheck():
    x, w = _rand(20), _rand(3, seed=8)
    assert torch.autograd.gradcheck(smooth_op.op, (x, w))
    torch.library.opcheck(smooth_op.op, (x, w))
    torch.library.opcheck(sine_op.op, (x, 2.0))


def test_forward_mode_through_torch_func_jvp():
    x, w, b = _rand(6, 5, grad=False), _rand(5, 4, grad=False, seed=1), _rand(4, grad=False)
    tx, tw, tb = _rand(6, 5, grad=False, seed=9), _rand(5, 4, grad=False, seed=10), \
        _rand(4, grad=False, seed=11)
    out, tangent = torch.func.jvp(dense_op, (x, w, b), (tx, tw, tb))
    want, want_tangent = torch.func.jvp(_dense_reference, (x, w, b), (tx, tw, tb))
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(tangent, want_tangent)
    (r2, q), (tr2, tq) = torch.func.jvp(polar_op, (x[0], b.repeat(2)[:5]),
                                        (tx[0], torch.zeros(5, dtype=torch.float64)))
    torch.testing.assert_close(tr2, 2 * x[0] * tx[0])
    torch.testing.assert_close(tq, b.repeat(2)[:5] * tx[0])


def test_forward_ad_dual_tensors():
    import torch.autograd.forward_ad as fwAD
    x, t = _rand(30, grad=False), _rand(30, grad=False, seed=12)
    with fwAD.dual_level():
        out = sine_op(fwAD.make_dual(x, t), 2.0)
        tangent = fwAD.unpack_dual(out).tangent
    torch.testing.assert_close(tangent, 2.0 * (torch.cos(x) * x + torch.sin(x)) * t)


def test_torch_compile_fullgraph_forward_and_backward():
    torch._dynamo.reset()

    def loss(x, w, b):
        return (dense_op(x, w, b) * 2.0).square().mean() + squares_op(x.flatten(), x.flatten())[0]

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    args = [_rand(6, 5), _rand(5, 4, seed=1), _rand(4, seed=2)]
    got = compiled(*args)
    got.backward()
    grads = [a.grad.clone() for a in args]
    for a in args:
        a.grad = None
    want = loss(*args)
    want.backward()
    torch.testing.assert_close(got, want)
    for g, a in zip(grads, args):
        torch.testing.assert_close(g, a.grad)


def test_training_loop_converges():
    torch.manual_seed(0)
    x = torch.randn(64, 8)
    target = torch.tanh(x @ torch.randn(8, 4) + 0.3)
    w = torch.nn.Parameter(0.1 * torch.randn(8, 4))
    b = torch.nn.Parameter(torch.zeros(4))
    optimizer = torch.optim.Adam([w, b], lr=0.05)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(dense_op(x, w, b), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]


def test_definition_errors_name_what_to_write():
    with pytest.raises(TypeError, match="not a parameter of smooth"):
        zm.torch.function(smooth, lambda x, w: (1, 1), outputs={"z": "x"})
    with pytest.raises(TypeError, match="outputs is a dict"):
        zm.torch.function(smooth, lambda x, w: (1, 1), outputs=["y"])
    with pytest.raises(TypeError, match="float, int or bool"):
        zm.torch.function(scaled_sine, lambda x, a: (1, 1), outputs={"y": "x"},
                          scalars={"a": complex})
    with pytest.raises(TypeError, match="takes \\(x, w\\)"):
        smooth_op(_rand(4))


def test_bad_launch_configuration_is_a_launch_error():
    op = zm.torch.function(smooth, lambda x, w: 64, outputs={"y": "x"})
    with pytest.raises(zm.LaunchError, match="return \\(grid, block\\)"):
        op(_rand(4), _rand(3))


def test_import_zymo_does_not_import_torch():
    code = "import sys, zymo; assert 'torch' not in sys.modules; zymo.torch; " \
           "assert 'torch' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_example_training_script_runs_as_a_user_would():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "torch_training.py")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    losses = [float(line.split()[-1]) for line in done.stdout.splitlines()
              if line.startswith("step")]
    assert len(losses) >= 10 and losses[-1] < 0.5 * losses[0]
