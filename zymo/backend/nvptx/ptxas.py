"""NVIDIA's PTX assembler as a checker: does ptxas accept the PTX, and what does the kernel
cost in registers, spills, stack and shared memory (`ptxas --verbose`).

Used by the tests (CI has ptxas but no GPU) and by the benchmarks to explain outliers. Not
needed at run time: the driver or nvJitLink assembles PTX there.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


class PtxasError(RuntimeError):
    """ptxas rejected the PTX; the message holds its output and the PTX file's path."""


@dataclass(frozen=True)
class PtxasReport:
    """What `ptxas --verbose` says about one function."""

    function: str
    arch: str
    registers: int = 0
    spill_stores: int = 0            # bytes
    spill_loads: int = 0             # bytes
    stack_frame: int = 0             # bytes per thread
    shared_bytes: int = 0            # static shared memory (smem)
    barriers: int = 0
    log: str = ""


_FIELDS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "stack_frame": re.compile(r"(\d+) bytes stack frame"),
    "shared_bytes": re.compile(r"(\d+) bytes smem"),
    "barriers": re.compile(r"used (\d+) barriers"),
}
_FUNCTION = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")


def find() -> str | None:
    """The ptxas executable: on PATH, else under $CUDA_HOME or /usr/local/cuda."""
    found = shutil.which("ptxas")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "ptxas").is_file():
            return str(Path(root) / "bin" / "ptxas")
    return None


def assemble(ptx: str, arch: str = "sm_90", entry: str | None = None,
             options: tuple[str, ...] = ()) -> PtxasReport:
    """Assemble `ptx` for `arch`; the report of function `entry` (default: the first entry).
    PtxasError when ptxas rejects it (the PTX is kept in a file named in the message)."""
    executable = find()
    if executable is None:
        raise FileNotFoundError("ptxas was not found: put the CUDA toolkit's bin on PATH or "
                                "set CUDA_HOME")
    with tempfile.TemporaryDirectory(prefix="zymo-ptxas-") as folder:
        source, cubin = Path(folder, "kernel.ptx"), Path(folder, "kernel.cubin")
        source.write_text(ptx)
        command = [executable, f"-arch={arch}", "--verbose", *options, str(source),
                   "-o", str(cubin)]
        done = subprocess.run(command, capture_output=True, text=True)
        log = done.stdout + done.stderr
        if done.returncode != 0:
            kept = Path(tempfile.mkstemp(prefix="zymo-rejected-", suffix=".ptx")[1])
            kept.write_text(ptx)
            raise PtxasError(f"ptxas -arch={arch} rejected the PTX (kept in {kept}):\n{log}")
    return parse_report(log, arch, entry or _first_entry(ptx))


def parse_report(log: str, arch: str, function: str) -> PtxasReport:
    """The numbers `ptxas --verbose` printed for `function`."""
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in log.splitlines():
        match = _FUNCTION.search(line)
        if match:
            current = sections.setdefault(match.group(1), [])
        current.append(line)
    text = "\n".join(sections.get(function, []))
    numbers = {name: int(m.group(1)) for name, pattern in _FIELDS.items()
               if (m := pattern.search(text))}
    return PtxasReport(function, arch, log=log, **numbers)


def _first_entry(ptx: str) -> str:
    match = re.search(r"\.entry\s+([\w$]+)", ptx)
    return match.group(1) if match else ""
