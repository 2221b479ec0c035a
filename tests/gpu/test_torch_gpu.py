"""zm.torch.function on CUDA tensors: gradcheck in float64, launches on PyTorch's current
stream, torch.compile(fullgraph=True) and a training loop, all on the GPU."""
from __future__ import annotations

import pytest

import zymo as zm
from interop.kernels import dense_tanh, smooth, sum_of_squares

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="PyTorch sees no GPU")]


def _blocks(n, threads=128):
    return ((n + threads - 1) // threads, threads)


dense = zm.torch.function(
    dense_tanh, lambda x, w, b: (((x.shape[0] + 15) // 16, (w.shape[1] + 15) // 16), (16, 16)),
    outputs={"y": lambda x, w, b: (x.shape[0], w.shape[1])})
squares = zm.torch.function(sum_of_squares, lambda x, w: _blocks(x.shape[0]),
                            outputs={"total": zm.torch.Output((1,))})
smoothed = zm.torch.function(smooth, lambda x, w: _blocks(x.shape[0]), outputs={"y": "x"})


def _rand(*shape, seed=0):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, dtype=torch.float64, device="cuda",
                       generator=generator).requires_grad_(True)


def test_gradcheck_on_cuda_tensors():
    assert torch.autograd.gradcheck(dense, (_rand(9, 7), _rand(7, 5, seed=1), _rand(5, seed=2)))
    assert torch.autograd.gradcheck(squares, (_rand(300), _rand(300, seed=3)))
    assert torch.autograd.gradcheck(smoothed, (_rand(200), _rand(3, seed=4)))


def test_forward_mode_on_cuda_tensors():
    x, w, b = (t.detach() for t in (_rand(9, 7), _rand(7, 5, seed=1), _rand(5, seed=2)))
    tangents = tuple(torch.randn_like(t) for t in (x, w, b))
    _, got = torch.func.jvp(dense, (x, w, b), tangents)
    _, want = torch.func.jvp(lambda x, w, b: torch.tanh(x @ w + b), (x, w, b), tangents)
    torch.testing.assert_close(got, want)


def test_launches_follow_the_current_stream():
    side = torch.cuda.Stream()
    n = 1 << 20
    with torch.cuda.stream(side):
        x = torch.ones(n, device="cuda", dtype=torch.float32)
        weights = torch.tensor([0.0, 1.0, 0.0], device="cuda")
        torch.cuda._sleep(50_000_000)        # ~tens of ms of work queued before the update
        x.mul_(3.0)
        y = smoothed(x, weights)
        total = squares(y, torch.ones_like(y))
    side.synchronize()
    assert torch.all(y == 3.0)
    assert total.item() == pytest.approx(9.0 * n)


def test_torch_compile_fullgraph_on_cuda():
    torch._dynamo.reset()

    def loss(x, w, b):
        return dense(x, w, b).square().mean()

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    args = [_rand(33, 16), _rand(16, 8, seed=1), _rand(8, seed=2)]
    compiled(*args).backward()
    grads = [a.grad.clone() for a in args]
    for a in args:
        a.grad = None
    loss(*args).backward()
    for g, a in zip(grads, args):
        torch.testing.assert_close(g, a.grad)


def test_training_on_the_gpu_converges():
    torch.manual_seed(0)
    x = torch.randn(1024, 16, device="cuda")
    target = torch.tanh(x @ torch.randn(16, 8, device="cuda") + 0.2)
    w = torch.nn.Parameter(0.1 * torch.randn(16, 8, device="cuda"))
    b = torch.nn.Parameter(torch.zeros(8, device="cuda"))
    optimizer = torch.optim.Adam([w, b], lr=0.05)
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(dense(x, w, b), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]
