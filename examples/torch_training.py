"""A small PyTorch model whose hidden layer is a zymo kernel, trained on the CPU.

The layer `tanh(x @ w + b)` is one kernel (one thread per output element); `zm.torch.function`
makes it a PyTorch operator whose backward is the kernel's `zm.grad` derivative, so autograd,
optimizers and `torch.compile` use it like any other layer. On a GPU, move the model and data
to "cuda" and the same kernel runs there, on PyTorch's current stream.

    python examples/torch_training.py
"""
import torch

import zymo as zm


@zm.kernel
def dense_tanh(x, w, b, y):
    i, j = zm.grid(2)
    if i < x.shape[0] and j < w.shape[1]:
        acc = b[j]
        for k in range(x.shape[1]):
            acc += x[i, k] * w[k, j]
        y[i, j] = zm.math.tanh(acc)


def launch(x, w, b):
    """A 16x16 block per tile of the output: rows along x, units along y."""
    return ((x.shape[0] + 15) // 16, (w.shape[1] + 15) // 16), (16, 16)


dense = zm.torch.function(dense_tanh, launch,
                          outputs={"y": lambda x, w, b: (x.shape[0], w.shape[1])})


class Model(torch.nn.Module):
    def __init__(self, features: int, hidden: int):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(features, hidden) / features ** 0.5)
        self.b = torch.nn.Parameter(torch.zeros(hidden))
        self.head = torch.nn.Linear(hidden, 1)

    def forward(self, x):
        return self.head(dense(x, self.w, self.b)).squeeze(-1)


def main(steps: int = 40) -> None:
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    y = torch.sin(x[:, 0]) + 0.5 * x[:, 1] * x[:, 2]      # the function to learn
    model = Model(16, 32)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for step in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 4 == 0 or step == steps - 1:
            print(f"step {step:3d}  loss {loss.item():.5f}")


if __name__ == "__main__":
    main()
