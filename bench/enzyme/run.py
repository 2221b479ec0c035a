"""The Enzyme GPU suite's table: gate, then time, every application.

    python -m bench.enzyme.run [--apps xsbench,rsbench,...] [--scale quick|paper]
                               [--device cpu|cuda] [--output FILE] [--grad-registers N|auto]

For each application module of APPS (a missing one is a row that says so):
1. the correctness gate (`case.gate`, float64 on a small instance: directional derivatives
   against central finite differences and the dot-product test); a failed or broken gate is a
   row with the reason and no timings;
2. on the GPU: the primal, the primal compiled as the derivative is, the gradient (forward and
   reverse sweeps) and our CUDA C primal (NVRTC through CuPy), each timed with CUDA events
   around launches queued behind a spin kernel (host launch cost hidden), each from a cold
   L2, median of ROUNDS x REPS after a warm-up (a gradient from its seeds, put back before
   each call); the CUDA C output checked against zymo's first; registers and
   spill stores of each program from ptxas. On the CPU (no GPU, or --device cpu): wall-clock
   medians of the CPU backend, which are not the issue's measure, and registers from ptxas of
   the sm_90 PTX the compiler makes for each specialization (without the launch-time `noalias`
   of the built programs).

The table goes to bench/results/enzyme-<gpu>.md (`cpu` without a GPU) or --output.
"""
from __future__ import annotations

import argparse
import importlib
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.enzyme import harness  # noqa: E402
from bench.enzyme.case import PAPER, QUICK  # noqa: E402

APPS = ("xsbench", "rsbench", "lulesh", "lbm", "dg")
ROUNDS, REPS = 5, 3
CPU_ROUNDS = 3
SPIN_CYCLES = 30_000_000


def load(names) -> list:
    """(module name, Case or None, why not) for each name, or for each of the module's CASES
    where it has several (LULESH: its full state and the paper's activity)."""
    out = []
    for name in names:
        try:
            module = importlib.import_module(f"bench.enzyme.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"bench.enzyme.{name}":
                raise
            out.append((name, None, "module not present"))
            continue
        cases = getattr(module, "CASES", None) or (getattr(module, "CASE", None),)
        out += [(name, case, "" if case is not None else "module defines no CASE")
                for case in cases]
    return out


class Timer:
    """Median milliseconds of a closure that queues work: CUDA events on the GPU, wall clock
    on the CPU (whose launches return when done). `before` (untimed) runs ahead of each
    call: a gradient's seeds put back. On the GPU every call starts from a cold L2 (a write
    of twice its size between calls), so that what `before` or the previous call left there
    is not read back for free."""

    def __init__(self, device: str):
        self.device = device
        if device == "cuda":
            import cupy as cp
            self.cp = cp
            self.spin = cp.RawKernel(r'''extern "C" __global__ void spin(long long n) {
                long long start = clock64(); while (clock64() - start < n) {} }''', "spin")
            self.scrub = harness.l2_scrub(cp)

    def __call__(self, fn, before=None) -> float:
        before = before or (lambda: None)
        if self.device != "cuda":
            before()
            fn()
            times = []
            for _ in range(CPU_ROUNDS):
                before()
                start = time.perf_counter()
                fn()
                times.append((time.perf_counter() - start) * 1e3)
            return statistics.median(times)
        cp = self.cp
        before()
        fn()
        cp.cuda.Device().synchronize()
        times = []
        for _ in range(ROUNDS):
            self.spin((1,), (1,), (cp.int64(SPIN_CYCLES),))
            pairs = []
            for r in range(REPS):
                before()
                self.scrub.fill(r + 1)
                pair = (cp.cuda.Event(), cp.cuda.Event())
                pair[0].record()
                fn()
                pair[1].record()
                pairs.append(pair)
            pairs[-1][1].synchronize()
            times += [cp.cuda.get_elapsed_time(*pair) for pair in pairs]
        return statistics.median(times)


def registers(specs: dict, device: str) -> dict:
    """label -> "registers/spill stores" from ptxas."""
    from zymo.backend.nvptx import ptxas
    if device == "cuda":
        from zymo.runtime.cuda import driver
        arch = driver.current_device().arch
    else:
        arch = "sm_90"
    out = {}
    for label, spec in specs.items():
        try:
            ptx = spec.compiled("cuda").ptx if device == "cuda" else spec.ptx(arch)
            report = ptxas.assemble(ptx, arch)
            out[label] = f"{report.registers}/{report.spill_stores}"
        except Exception as error:   # noqa: BLE001 (ptxas missing, ...): the cell says why
            out[label] = f"n/a ({type(error).__name__})"
    return out


def run_case(name: str, case, scale: str, device: str, timer: Timer) -> dict:
    row = {"app": case.name, "paper_ratio": case.paper_ratio, "notes": list(case.notes)}
    print(f"[{name}] gate on {device} ...", flush=True)
    try:
        gate = case.gate(device)
    except Exception as error:   # noqa: BLE001: the row says why there are no timings
        traceback.print_exc()
        row["status"] = f"gate error: {type(error).__name__}: {_first_line(error)}"
        return row
    row["gate"] = gate
    if not gate.ok:
        row["status"] = (f"gate FAILED (FD error {gate.fd_error:.1e}, dot {gate.dot_error:.1e}, "
                         f"tolerance {gate.tolerance:.0e}): not timed")
        return row
    print(f"[{name}] gate ok: {gate.detail}; setting up {scale} ...", flush=True)
    state = None
    harness.GRADIENTS.clear()
    try:
        state = case.setup(scale, device)
        for key, fn in (("primal", case.primal), ("as_derivative", case.primal_as_derivative),
                        ("gradient", case.gradient)):
            row[key] = timer(lambda fn=fn, state=state: fn(state))
            print(f"[{name}] {key}: {row[key]:.3f} ms", flush=True)
        if case.reseed is not None:
            # each timed gradient starts from the seeds (one gradient's work, not the work
            # on cotangents an earlier call consumed), put back before it, untimed
            row["consumed"] = row["gradient"]
            row["gradient"] = timer(lambda state=state: case.gradient(state),
                                    before=lambda state=state: case.reseed(state))
            print(f"[{name}] gradient from its seeds: {row['gradient']:.3f} ms", flush=True)
        row["ratio"] = row["gradient"] / row["primal"]
        row["tape"] = case.tape_bytes(state)
        row["regs"] = registers(case.specializations(state), device)
        row["tuning"] = harness.tunings()
        if device == "cuda" and case.cuda_c and case.cuda_c_launch is not None:
            cuda_c(row, case, state, timer)
        row["status"] = "ok"
    except Exception as error:   # noqa: BLE001
        traceback.print_exc()
        row["status"] = f"error: {type(error).__name__}: {_first_line(error)}"
    finally:
        del state
        if device == "cuda":
            import cupy as cp
            cp.get_default_memory_pool().free_all_blocks()
    return row


def cuda_c(row: dict, case, state, timer: Timer) -> None:
    import cupy as cp
    module = cp.RawModule(code=case.cuda_c, options=("-std=c++17",))
    case.primal(state)
    case.cuda_c_launch(state, module)
    cp.cuda.Device().synchronize()
    if case.cuda_c_check is not None:
        row["cuda_c_error"] = case.cuda_c_check(state)
    row["cuda_c"] = timer(lambda: case.cuda_c_launch(state, module))
    row["zymo_vs_c"] = row["primal"] / row["cuda_c"]
    # the first kernel the module defines whose symbol is there (an extern "C" name)
    kernels = [k for k in _kernel_names(case.cuda_c)]
    if kernels:
        fn = module.get_function(kernels[0])
        row["cuda_c_regs"] = f"{fn.num_regs}/{fn.local_size_bytes} B local"


def _kernel_names(source: str) -> list:
    import re
    return re.findall(r'extern "C" __global__ void(?:\s+__launch_bounds__\([^)]*\))?\s+(\w+)',
                      source)


def _first_line(error) -> str:
    text = str(error).strip().splitlines()
    return text[0][:160] if text else ""


def gpu_label(device: str) -> tuple[str, str]:
    """(slug for the file name, the device's name)."""
    if device != "cuda":
        return "cpu", platform.processor() or platform.machine()
    import cupy as cp
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    for slug in ("h100", "h200", "a100", "v100", "l40s", "l4", "rtx"):
        if slug in name.lower():
            return slug, name
    return name.lower().replace(" ", "-"), name


def _ms(value) -> str:
    return "" if value is None else f"{value:.3f}"


def table(rows: list, scale: str, device: str, device_name: str) -> str:
    if harness.GRAD_REGISTERS == "auto":
        from zymo.runtime.autotune import CANDIDATES
        cap = (f", gradients' register caps picked among {'/'.join(map(str, CANDIDATES))} by "
               f"timing at their first launch")
    elif harness.GRAD_REGISTERS != harness.DERIVATIVE_REGISTERS:
        cap = f", gradients capped at {harness.GRAD_REGISTERS} registers"
    else:
        cap = ""
    lines = [f"# The Enzyme GPU suite on {device_name} ({scale} scale{cap})", ""]
    if device != "cuda":
        lines += ["CPU run: the CPU backend's wall-clock times, for a smoke test of the gates and "
                  "the programs; they are not the issue's measure (GPU kernel times on an H100). "
                  "Registers/spills from ptxas of the sm_90 PTX of each specialization.", ""]
    else:
        lines += [f"GPU time from CUDA events around launches queued behind a spin kernel, "
                  f"median of {ROUNDS}x{REPS} after a warm-up, each call from a cold L2 (a "
                  f"write of twice its size before it, untimed). Ratio = gradient / primal. "
                  "Registers/spill stores from ptxas of the loaded PTX; CUDA C: NVRTC (CuPy), "
                  "registers/local bytes from the loaded function.", ""]
    lines += ["| app | gate: FD error / dot error | primal ms | primal as derivative ms | "
              "gradient ms | ratio | Enzyme's ratio | tape bytes | regs/spills primal | "
              "regs/spills as derivative | regs/spills gradient | CUDA C ms | zymo / CUDA C | "
              "CUDA C regs | CUDA C vs zymo error | status |",
              "|" + "---|" * 16]
    for row in rows:
        gate = row.get("gate")
        regs = row.get("regs", {})
        gradient = next((label for label in regs if label.startswith("gradient")), None)
        cells = [row["app"],
                 f"{gate.fd_error:.1e} / {gate.dot_error:.1e}" if gate else "",
                 _ms(row.get("primal")), _ms(row.get("as_derivative")),
                 _ms(row.get("gradient")),
                 f"{row['ratio']:.2f}x" if "ratio" in row else "",
                 f"{row['paper_ratio']}x" if row.get("paper_ratio") else "",
                 str(row.get("tape", "")),
                 regs.get("primal", ""), regs.get("primal as derivative", ""),
                 "" if gradient is None else
                 f"{regs[gradient]}{gradient[len('gradient'):]}",
                 _ms(row.get("cuda_c")),
                 f"{row['zymo_vs_c']:.2f}x" if "zymo_vs_c" in row else "",
                 row.get("cuda_c_regs", ""),
                 f"{row['cuda_c_error']:.1e}" if "cuda_c_error" in row else "",
                 row.get("status", "")]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for row in rows:
        gate = row.get("gate")
        if gate is not None and gate.detail:
            detail = gate.detail.strip()
            if "\n" in detail:   # a report of several lines: kept as it is
                lines += [f"- {row['app']} gate:", "", "  ```"]
                lines += [f"  {line}" for line in detail.splitlines()] + ["  ```", ""]
            else:
                lines.append(f"- {row['app']} gate: {detail}")
        shown = {"primal", "primal as derivative"}
        first_gradient = next((l for l in row.get("regs", {}) if l.startswith("gradient")),
                              None)
        for label, cell in row.get("regs", {}).items():
            if label not in shown and label != first_gradient:
                lines.append(f"- {row['app']}: registers/spill stores of {label}: {cell}")
        if "consumed" in row:
            lines.append(f"- {row['app']}: the gradient is timed from its seeds (put back before "
                         f"each call, untimed); called again on the cotangents an earlier call "
                         f"left: {row['consumed']:.3f} ms")
        for tuning in row.get("tuning", ()):
            lines.append(f"- {row['app']}: register cap chosen: {tuning}")
        for note in row.get("notes", ()):
            lines.append(f"- {row['app']}: {note}")
    return "\n".join(lines) + "\n"


def default_device() -> str:
    try:
        from zymo.runtime.cuda import driver
        import cupy  # noqa: F401
        return "cuda" if driver.is_available() else "cpu"
    except Exception:   # noqa: BLE001: no CUDA stack at all
        return "cpu"


def register_cap(text: str) -> int | str:
    """--grad-registers: an int from 16 to 255, or "auto"."""
    if text == "auto":
        return text
    from zymo.runtime.kernel import check_max_registers
    try:
        value = int(text)
        check_max_registers(value)
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"{text!r}: give an int from 16 to 255 or auto"
                                         ) from None
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", default=",".join(APPS))
    parser.add_argument("--scale", choices=(QUICK, PAPER), default=None,
                        help="default: paper on the GPU, quick on the CPU")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None)
    parser.add_argument("--output", default=None)
    parser.add_argument("--grad-registers", type=register_cap, default=None,
                        help="the gradients' register cap (default: zm.grad's, 255), or "
                             "\"auto\": timed at each gradient's first launch among "
                             "zymo.runtime.autotune.CANDIDATES; LBM's tape keeps the default")
    args = parser.parse_args(argv)
    if args.grad_registers is not None:
        harness.GRAD_REGISTERS = args.grad_registers
    device = args.device or default_device()
    scale = args.scale or (PAPER if device == "cuda" else QUICK)
    names = [n.strip() for n in args.apps.split(",") if n.strip()]
    unknown = [n for n in names if n not in APPS]
    if unknown:
        parser.error(f"unknown apps {unknown}: choose from {', '.join(APPS)}")
    timer = Timer(device)
    rows = []
    for name, case, why in load(names):
        if case is None:
            print(f"[{name}] {why}", flush=True)
            rows.append({"app": name, "status": why})
            continue
        rows.append(run_case(name, case, scale, device, timer))
    slug, device_name = gpu_label(device)
    text = table(rows, scale, device, device_name)
    output = Path(args.output) if args.output else ROOT / "bench" / "results" / \
        f"enzyme-{slug}.md"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    print(text)
    print(f"written to {output}")
    return 0 if all(r.get("status") in ("ok", "module not present") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
