"""Reverse-mode overhead on one GPU: time of the `zm.grad` launch / time of the original launch.

    python bench/grad_overhead.py [--output bench/results/grad-overhead-<gpu>.md]
                                  [--grad-max-registers N] [--only NAME-PREFIX [--block WxH]]

Every gradient is checked against central finite differences (`zm.check_grad`, float64, on the
GPU) on a small instance before the large one is timed. GPU time: CUDA events around launches
queued behind a spin kernel (host launch cost hidden), each from a cold L2, median of ROUNDS x
REPS, a derivative from its output seeds (put back before each launch, untimed); both the primal
and the derivative go through the same compiled-program launch path. PyTorch autograd of the same
computation written with tensor operations (forward + backward, the same seed) beside it.
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import zymo as zm  # noqa: E402
from ad import kernels as K  # noqa: E402
from corpus.memory import stencil5  # noqa: E402
from corpus.apps import euler_face_flux, _face_args  # noqa: E402
from bench.cfd import flux as cfd_flux  # noqa: E402
from bench.enzyme.harness import l2_scrub  # noqa: E402
# D3Q19 lattice Boltzmann, BGK, pull streaming, periodic box (Parboil LBM's model): the
# single step of the Enzyme suite's multi-step LBM
from bench.enzyme.lbm import WQ, lbm_step  # noqa: E402

ROUNDS, REPS = 5, 10

# ---- the 3-D Roe flux per edge (bench/cfd: Roe averages, entropy fix), float64 --------------
@zm.kernel
def roe_edges(ql, qr, nrm, out):
    e = zm.grid(1)
    if e < ql.shape[0]:
        F = cfd_flux.roe_flux_cons((ql[e, 0], ql[e, 1], ql[e, 2], ql[e, 3], ql[e, 4]),
                                   (qr[e, 0], qr[e, 1], qr[e, 2], qr[e, 3], qr[e, 4]),
                                   (nrm[e, 0], nrm[e, 1], nrm[e, 2]))
        out[e, 0] = F[0]
        out[e, 1] = F[1]
        out[e, 2] = F[2]
        out[e, 3] = F[3]
        out[e, 4] = F[4]


def _roe_args(rng, edges):
    def states():
        rho, p = rng.uniform(0.9, 1.1, edges), rng.uniform(0.9, 1.1, edges)
        vel = rng.uniform(-0.3, 0.3, (edges, 3))
        energy = p / cfd_flux.GM1 + 0.5 * rho * (vel ** 2).sum(1)
        return np.column_stack([rho, rho[:, None] * vel, energy])
    nrm = rng.standard_normal((edges, 3))
    nrm /= np.linalg.norm(nrm, axis=1, keepdims=True)
    return [_dup(states()), _dup(states()), nrm, _dup(np.zeros((edges, 5)))]


def _lbm_args(rng, shape, dtype=np.float32):
    nz, ny, nx = shape
    f = (WQ[:, None, None, None] * (1.0 + 0.05 * rng.standard_normal((19, nz, ny, nx))))
    return [f.astype(dtype), np.zeros((19, nz, ny, nx), dtype), 1.2]


def _dup(a):
    return zm.Duplicated(a, np.zeros_like(a))


def cases():
    """(name, kernel, grid, block, small args for check_grad, big-args maker, torch fn)."""
    rng = np.random.default_rng(0)
    out = []
    n = 1 << 24
    out.append(("saxpy f32, n=2^24", K.in_place_axpy, None,
                [zm.Active(2.0), _dup(rng.standard_normal(300)), _dup(rng.standard_normal(300))],
                lambda: [zm.Active(np.float32(2.0)),
                         *(_dup(rng.standard_normal(n).astype(np.float32)) for _ in range(2))],
                (3, 128), (-(-n // 256), 256)))
    sy, sx = 4096, 4096
    out.append(("2-D stencil f32, 4096^2", stencil5, None,
                [_dup(rng.standard_normal((20, 30))), _dup(np.zeros((20, 30))), zm.Active(0.2)],
                lambda: [_dup(rng.standard_normal((sy, sx)).astype(np.float32)),
                         _dup(np.zeros((sy, sx), np.float32)), zm.Active(np.float32(0.2))],
                ((2, 3), (16, 8)), ((sx // 32, sy // 8), (32, 8))))
    m, d = 1 << 18, 32
    out.append((f"dense layer f32, {m}x{d}->{d}", K.dense, None,
                [_dup(rng.standard_normal((5, 7)) * 0.3), _dup(rng.standard_normal(5)),
                 _dup(rng.standard_normal((70, 7))), _dup(np.zeros((70, 5)))],
                lambda: [_dup((rng.standard_normal((d, d)) * 0.2).astype(np.float32)),
                         _dup(rng.standard_normal(d).astype(np.float32)),
                         _dup(rng.standard_normal((m, d)).astype(np.float32)),
                         _dup(np.zeros((m, d), np.float32))],
                (2, 64), (m // 128, 128)))
    out.append(("shared-memory reduction f64, n=2^24", K.block_reduce, None,
                [_dup(rng.standard_normal(500)), _dup(np.zeros(1))],
                lambda: [_dup(rng.standard_normal(n)), _dup(np.zeros(1))],
                (4, 128), (n // 128, 128)))
    faces = 1 << 20
    small_face = _face_args(np.random.default_rng(1))
    out.append(("Euler face flux f64 (Rusanov+HLL), 2^20 faces", euler_face_flux, None,
                [_dup(a) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
                 for a in small_face],
                lambda: [_dup(a) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
                         for a in _face_args_big(faces)],
                (-(-small_face[0].shape[0] // 128), 128), (faces // 128, 128)))
    edges = 1 << 20
    out.append(("Roe flux per edge f64 (3-D, entropy fix), 2^20 edges", roe_edges, None,
                _roe_args(rng, 300), lambda: _roe_args(rng, edges),
                (3, 128), (edges // 128, 128)))
    lshape = (150, 120, 120)   # Parboil's launch below: a block of 120 threads per x row
    out.append(("LBM D3Q19 stream-collide f32, 120x120x150", lbm_step, None,
                [_dup(a) if isinstance(a, np.ndarray) else a
                 for a in _lbm_args(rng, (4, 4, 8), np.float64)],
                lambda: [_dup(a) if isinstance(a, np.ndarray) else a
                         for a in _lbm_args(rng, lshape)],
                ((1, 1, 2), (8, 4, 2)), ((1, 120, 150), (120, 1, 1))))
    counts_small = rng.integers(0, 6, 300).astype(np.int32)
    nd = 1 << 22
    out.append(("per-thread dynamic loop f32 (0-15 trips), 2^22", K.power_loop, None,
                [_dup(rng.uniform(-1, 1, 300)), counts_small, _dup(np.zeros(300))],
                lambda: [_dup(rng.uniform(-1, 1, nd).astype(np.float32)),
                         rng.integers(0, 16, nd).astype(np.int32),
                         _dup(np.zeros(nd, np.float32))],
                (3, 128), (nd // 256, 256)))
    return out


def _face_args_big(faces):
    rng = np.random.default_rng(2)
    small = _face_args(rng)
    reps = -(-faces // small[0].shape[0])
    return [np.ascontiguousarray(np.concatenate([a] * reps)[:faces]) if isinstance(a, np.ndarray)
            else a for a in small]


def main() -> int:
    import cupy as cp
    from zymo.backend.nvptx import ptxas
    from zymo.runtime.cuda import driver
    arch = driver.current_device().arch
    spin = cp.RawKernel(r'''extern "C" __global__ void spin(long long ns) {
        long long start = clock64(); while (clock64() - start < ns) {} }''', "spin")
    scrub = l2_scrub(cp)   # written between timed launches
    rows = []
    only = _text_option("--only") or ""
    for name, kernel, _, small, big, small_cfg, big_cfg in cases():
        if not name.startswith(only):
            continue
        big_cfg = _reblocked(big_cfg, _text_option("--block"))
        row = {"name": name}
        try:
            report = zm.check_grad(kernel, small_cfg[0], small_cfg[1], *small, backend="cuda")
            row["check"] = "pass" if report.ok else "FAIL"
            if not report.ok:
                print(report)
        except Exception as error:   # noqa: BLE001
            row["check"] = f"error: {type(error).__name__}: {str(error).splitlines()[0][:80]}"
            rows.append(row)
            continue
        args = big()
        dev = []
        for a in args:
            if isinstance(a, zm.Duplicated):
                seed = np.ones_like(a.shadow) if a.value.ndim else a.shadow
                dev.append(zm.Duplicated(cp.asarray(a.value), cp.asarray(seed)))
            elif isinstance(a, zm.Active) or not isinstance(a, np.ndarray):
                dev.append(a)
            else:
                dev.append(cp.asarray(a))
        from zymo.runtime.kernel import normalize_dims
        grid, block = big_cfg
        dims = (normalize_dims(grid, "grid"), normalize_dims(block, "block"))
        dk = zm.grad(kernel, max_registers=_option("--grad-max-registers"))
        dk[grid, block](*dev)                          # compile + one run
        gspec = dk.last
        primal_args = [a.value if isinstance(a, (zm.Duplicated, zm.Active)) else a for a in dev]
        kernel[grid, block](*primal_args)
        pspec = kernel.specialization_for(primal_args)
        gflat = []
        for a in dev:
            if isinstance(a, zm.Duplicated):
                gflat += [a.value, a.shadow]
            elif isinstance(a, zm.Active):
                gflat += [a.value, cp.zeros(1, np.asarray(a.value).dtype
                                            if isinstance(a.value, np.generic) else np.float64)]
            else:
                gflat.append(a)
        from zymo.runtime.grad import _tapes, tape_bytes_per_thread
        gflat += _tapes(gspec, "cuda", *dims, primal_args)   # global tapes, if any
        row["tape"] = tape_bytes_per_thread(gspec, primal_args)
        from zymo.runtime.kernel import _pass_args as _pass_like
        grad_runs = [(gspec.compiled("cuda"), _pass_like(gflat, gspec.params))]
        if gspec.consume is not None:   # a gathering derivative's second kernel is timed too
            cgrid, cargs = gspec.consume.configured(dims[0], gflat)
            grad_runs.append((gspec.consume.compiled("cuda"),
                              _pass_like(cargs, gspec.consume.params), cgrid))
        runs = {"primal": [(pspec.compiled("cuda"), _pass_like(primal_args, pspec.params))],
                "grad": grad_runs}
        try:
            runs["hvp"] = hvp_runs(dk, dev, gflat[:len(gflat) - len(gspec.tapes)], dims,
                                   primal_args)
        except Exception as error:   # noqa: BLE001
            row["hvp"] = f"error: {type(error).__name__}: {str(error).splitlines()[0][:60]} | -"
        # a derivative consumes its output seeds (a store's adjoint zeroes the shadow it
        # reads): each timed derivative starts from them, put back before it (untimed); every
        # launch starts from a cold L2, so that what the copies left there is not read free
        seeds = [(a.shadow, a.shadow.copy()) for a in dev if isinstance(a, zm.Duplicated)]
        times = {k: [] for k in runs}
        for _ in range(ROUNDS):
            for key, programs in runs.items():
                spin((1,), (1,), (np.int64(30_000_000),))
                pairs = []
                for r in range(REPS):
                    for shadow, seed in seeds if key != "primal" else ():
                        shadow[...] = seed
                    scrub.fill(r + 1)
                    pair = (cp.cuda.Event(), cp.cuda.Event())
                    pair[0].record()
                    for program, call, *grid in programs:
                        program.launch(grid[0] if grid else dims[0], dims[1], call)
                    pair[1].record()
                    pairs.append(pair)
                pairs[-1][1].synchronize()
                times[key] += [cp.cuda.get_elapsed_time(*pair) for pair in pairs]
        row["primal_ms"] = float(np.median(times["primal"]))
        row["grad_ms"] = float(np.median(times["grad"]))
        row["ratio"] = row["grad_ms"] / row["primal_ms"]
        if "hvp" in runs:
            row["hvp_ms"] = float(np.median(times["hvp"]))
            row["hvp"] = f"{row['hvp_ms']:.3f} | {row['hvp_ms'] / row['grad_ms']:.2f}x"
        for key, spec in (("primal", pspec), ("grad", gspec)):
            rep = ptxas.assemble(spec.ptx(arch), arch)
            row[f"{key}_regs"] = f"{rep.registers}/{rep.spill_stores}"
        row["torch"] = torch_time(name, dev)
        rows.append(row)
        print(row, flush=True)
    print_table(rows, arch)
    return 0


def hvp_runs(dk, dev, gflat, dims, primal_args):
    """The programs of `zm.jvp(zm.grad(kernel))` along a direction of 0.5 in every input: the
    gradient's arguments (`gflat`, without tapes), the tapes of the variant the HVP derives
    (without block-private copies where their tangents would not fit: `zymo.runtime.hvp`),
    and a tangent after each that has one."""
    import cupy as cp
    from zymo.runtime.grad import _tapes
    from zymo.runtime.kernel import _pass_args
    nested = [zm.Duplicated(a, zm.Duplicated(cp.full_like(a.value, 0.5), cp.zeros_like(a.shadow)))
              if isinstance(a, zm.Duplicated) else zm.Duplicated(a, type(a.value)(0.5))
              if isinstance(a, zm.Active) else a for a in dev]
    fk = zm.jvp(dk)
    fk[dims[0], dims[1]](*nested)   # compile + one run
    hspec = fk.last
    gflat = gflat + _tapes(hspec.primal, "cuda", *dims, primal_args)
    flat = []
    for a, tangents in zip(gflat, hspec.tangent_params):   # None or one tangent (width 1)
        flat.append(a)
        if tangents is not None:
            # a scalar's tangent has the scalar's own type (the program takes exact types)
            flat.append(cp.zeros(a.shape, a.dtype) if np.ndim(a) else type(a)(0.5))
    runs = [(hspec.compiled("cuda"), _pass_args(flat, hspec.params))]
    if hspec.consume is not None:
        cgrid, cargs = hspec.consume.primal.configured(dims[0], flat)
        runs.append((hspec.consume.compiled("cuda"), _pass_args(cargs, hspec.consume.params),
                     cgrid))
    return runs


def torch_time(name, dev):
    """PyTorch autograd (forward + backward) of the same computation, ms; None if not written."""
    try:
        import torch
    except ImportError:
        return None
    t = lambda a: torch.as_tensor(a, device="cuda")   # noqa: E731
    if name.startswith("saxpy"):
        x = t(dev[1].value).clone().requires_grad_()
        y0 = t(dev[2].value).clone().requires_grad_()
        a = torch.tensor(2.0, device="cuda", requires_grad=True)
        fn = lambda: (a * x + y0).backward(torch.ones_like(x))   # noqa: E731
    elif name.startswith("2-D stencil"):
        u = t(dev[0].value).clone().requires_grad_()

        def fn():
            inner = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                           + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
            inner.backward(torch.ones_like(inner))
    elif name.startswith("dense"):
        W = t(dev[0].value).clone().requires_grad_()
        b = t(dev[1].value).clone().requires_grad_()
        x = t(dev[2].value).clone().requires_grad_()
        fn = lambda: torch.tanh(x @ W.T + b).backward(   # noqa: E731
            torch.ones((x.shape[0], W.shape[0]), device="cuda"))
    elif name.startswith("shared-memory reduction"):
        x = t(dev[0].value).clone().requires_grad_()
        fn = lambda: (x * x).sum().backward()   # noqa: E731
    else:
        return None
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / 20 * 1e3


def _option(flag: str) -> int | None:
    return int(sys.argv[sys.argv.index(flag) + 1]) if flag in sys.argv else None


def _text_option(flag: str) -> str | None:
    return sys.argv[sys.argv.index(flag) + 1] if flag in sys.argv else None


def _reblocked(config, block: str | None):
    """`config` (grid, block) with the block `WxH[xD]` instead, the grid covering the same
    threads per axis (rounded up)."""
    if not block:
        return config
    grid, old = (tuple(v) if isinstance(v, tuple) else (v,) for v in config)
    new = tuple(int(b) for b in block.split("x"))
    if len(new) != len(old):
        raise SystemExit(f"--block {block}: the kernel's blocks have {len(old)} axes")
    return tuple(-(-g * b // n) for g, b, n in zip(grid, old, new)), new


def print_table(rows, arch):
    from zymo.runtime.cuda import driver
    device = driver.current_device()
    lines = [f"# Reverse-mode overhead on {device.name} ({arch})", "",
             "Overhead = GPU time of the zm.grad launch (forward sweep + reverse sweep; for a "
             "gathering derivative also its second kernel, which consumes the output "
             "cotangents) / GPU "
             "time of the original launch, same compiled-program launch path, CUDA events, "
             f"median of {ROUNDS}x{REPS} runs queued behind a spin kernel, each from a cold L2 "
             "(a write of twice its size before it, untimed); each derivative launch starts "
             "from its output seeds (put back before it, untimed). Gradients checked "
             "against finite differences (float64, on the GPU) on a small instance first. "
             "Tape: bytes per thread the forward sweep stores for the reverse sweep (per-thread "
             "tapes in local memory or registers, plus the thread's share of global tapes); "
             "other values are recomputed. "
             "Registers/spill stores from ptxas. PyTorch: forward + backward of the same "
             "computation in tensor ops (wall time, synchronized). HVP: the "
             "zm.jvp(zm.grad(kernel)) launch (forward over reverse, one direction), its time "
             "/ the gradient's."
             + (f" Derivative kernels compiled with `zm.grad(kernel, max_registers="
                f"{_option('--grad-max-registers')})`."
                if _option("--grad-max-registers") else ""), "",
             "| kernel | check | primal ms | grad ms | overhead | tape B/thread | "
             "regs/spills primal | regs/spills grad | PyTorch fwd+bwd ms | HVP ms | HVP/grad |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    ratios = []
    for row in rows:
        if "ratio" not in row:
            lines.append(f"| {row['name']} | {row['check']} | | | | | | | | | |")
            continue
        ratios.append(row["ratio"])
        torch_ms = f"{row['torch']:.3f}" if row.get("torch") else "-"
        lines.append(f"| {row['name']} | {row['check']} | {row['primal_ms']:.3f} | "
                     f"{row['grad_ms']:.3f} | {row['ratio']:.2f}x | {row['tape']} | "
                     f"{row['primal_regs']} | "
                     f"{row['grad_regs']} | {torch_ms} | {row['hvp']} |")
    if ratios:
        lines += ["", f"Geometric mean overhead: {math.exp(np.mean(np.log(ratios))):.2f}x"]
    text = "\n".join(lines)
    print(text)
    out = Path(sys.argv[sys.argv.index("--output") + 1]) if "--output" in sys.argv else None
    if out:
        out.write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
