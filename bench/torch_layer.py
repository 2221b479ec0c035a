"""A PyTorch training step whose layer is a zymo kernel (`zm.torch.function`), against the same
step with the layer written in PyTorch ops: on CUDA tensors where PyTorch sees a GPU, else on
the CPU.

    python bench/torch_layer.py [--output FILE] [--quick] [--device cpu|cuda]

Two layers, one of each kind the target names:
- dense `tanh(x @ w + b)`: PyTorch is well optimized here (a BLAS/cuBLAS matrix product and
  two elementwise kernels); the target is zymo within 1.2x.
- radial basis `exp(-g[j] * |x[i] - c[j]|^2)`: PyTorch is not (broadcasting materializes an
  N x M x K difference, forward and backward; `torch.cdist` avoids it but its backward does
  not); the target is zymo faster.

A step is forward, mean-squared loss, backward and an SGD update of the layer's parameters
(the input x is data: no gradient). Each number is the median of R rounds of S steps after a
warm-up, in milliseconds per step; on the GPU the rounds end with a synchronize.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

import zymo as zm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run as a script too
from bench.layer_kernels import ROWS, dense_tanh, dense_tanh_rows, radial, radial_rows  # noqa: E402


def _tiles(block, rows=1):
    """Threads along x's rows (blockIdx.x, the fast axis) and the layer's units, in blocks of
    `block`: with 32 rows a warp holds one unit, whose parameters' cotangents it sums whole;
    with 16, two runs of 16 lanes (segmented warp sums)."""
    def launch(x, matrix, per_unit):   # (x, w, b) or (x, c, g): the last has one per unit
        across, units = block[0] * rows, per_unit.shape[0]
        return ((x.shape[0] + across - 1) // across, (units + block[1] - 1) // block[1]), block
    return launch


# (label, block, rows per thread)
VARIANTS = (("32x8 blocks", (32, 8), 1), ("16x16 blocks", (16, 16), 1),
            (f"32x8 blocks, {ROWS} rows per thread", (32, 8), ROWS))
DENSE = {label: zm.torch.function(dense_tanh if rows == 1 else dense_tanh_rows,
                                  _tiles(block, rows),
                                  outputs={"y": lambda x, w, b: (x.shape[0], w.shape[1])})
         for label, block, rows in VARIANTS}
RADIAL = {label: zm.torch.function(radial if rows == 1 else radial_rows, _tiles(block, rows),
                                   outputs={"y": lambda x, c, g: (x.shape[0], c.shape[0])})
          for label, block, rows in VARIANTS}


def dense_torch(x, w, b):
    return torch.tanh(x @ w + b)


def radial_broadcast(x, c, g):
    return torch.exp(-g * ((x[:, None, :] - c[None]) ** 2).sum(-1))


def radial_cdist(x, c, g):
    return torch.exp(-g * torch.cdist(x, c) ** 2)


def _step_timer(layer, x, params, target, device: str, steps: int, rounds: int) -> float:
    optimizer = torch.optim.SGD(params, lr=1e-3)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(layer(x, *params), target)
        loss.backward()
        optimizer.step()

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(3):
        step()
    sync()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        times.append((time.perf_counter() - start) / steps * 1e3)
    return statistics.median(times)


def _check(zymo_layer, torch_layer, x, params) -> float:
    """The largest difference between the two layers' values and parameter gradients."""
    worst = 0.0
    outs = []
    for layer in (zymo_layer, torch_layer):
        ps = [p.detach().clone().requires_grad_(True) for p in params]
        y = layer(x, *ps)
        y.square().sum().backward()
        outs.append([y.detach()] + [p.grad for p in ps])
    for a, b in zip(*outs):
        worst = max(worst, float((a - b).abs().max() / (b.abs().max() + 1e-30)))
    return worst


def zymo_layers(by_variant: dict) -> list:
    return [(f"zymo, {label}", layer) for label, layer in by_variant.items()]


def run(device: str, quick: bool) -> list[str]:
    torch.manual_seed(0)
    big = device == "cuda" and not quick
    n, k, m = (16384, 64, 256) if big else (512, 32, 64) if quick else (2048, 32, 128)
    steps, rounds = (50, 7) if device == "cuda" else (5, 5) if quick else (10, 5)
    x = torch.randn(n, k, device=device)
    dense_params = [(0.2 * torch.randn(k, m, device=device)).requires_grad_(True),
                    torch.zeros(m, device=device, requires_grad=True)]
    radial_params = [torch.randn(m, k, device=device).requires_grad_(True),
                     torch.full((m,), 0.05, device=device, requires_grad=True)]
    target = torch.rand(n, m, device=device)
    rows = []
    cases = [("dense tanh(x@w+b)", "well optimized (BLAS)", dense_params,
              [*zymo_layers(DENSE), ("PyTorch ops", dense_torch)]),
             ("radial basis exp(-g|x-c|^2)", "not well optimized", radial_params,
              [*zymo_layers(RADIAL), ("PyTorch broadcast", radial_broadcast),
               ("PyTorch cdist", radial_cdist)])]
    for name, kind, params, layers in cases:
        error = max(_check(layers[v][1], layers[len(VARIANTS)][1], x, params)
                    for v in range(len(VARIANTS)))
        times = [(label, _step_timer(layer, x, params, target, device, steps, rounds))
                 for label, layer in layers]
        base = times[0][1]
        for label, ms in times:
            rows.append(f"| {name} | {kind} | {label} | {ms:.3f} | "
                        f"{ms / base:.2f}x | {error:.1e} |" if label.startswith("zymo") else
                        f"| {name} | {kind} | {label} | {ms:.3f} | {ms / base:.2f}x | |")
    header = [f"Training step (forward, MSE loss, backward, SGD) on {_device_name(device)}; "
              f"x: {n}x{k} float32, {m} units; median of {rounds} rounds of {steps} steps. "
              f"Last column but one: time / zymo's (above 1: zymo faster); last: zymo's largest "
              f"relative difference from PyTorch (values and gradients).", "",
              "| layer | PyTorch | implementation | ms / step | vs zymo | check |",
              "|---|---|---|---|---|---|"]
    return header + rows


def _device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    return f"the CPU ({torch.get_num_threads()} PyTorch threads; zymo's CPU backend)"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path)
    parser.add_argument("--quick", action="store_true", help="small sizes, few rounds")
    parser.add_argument("--device", choices=("cpu", "cuda"),
                        default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    text = "\n".join(run(args.device, args.quick)) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
