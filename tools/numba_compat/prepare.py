"""Build tools/numba_compat/{doc_examples,cudapy,data} (git-ignored) from numba-cuda's own test
files, renamed so that `numba.cuda` is `zymo.cuda`.  Measurement only: never commit these files.

Source: the numba-cuda release wheel (PyPI, `pip download numba-cuda --no-deps`), whose
numba_cuda/numba/cuda/tests/ tree is the released copy of the GitHub repository's tests.

Rename (textual, in this order; the third rule is applied first so that the first does not
shadow it — `numba_cuda.numba.cuda` contains `numba.cuda`):
    numba_cuda.numba.cuda  -> zymo.cuda
    numba.cuda             -> zymo.cuda
    from numba import cuda -> from zymo import cuda
Everything else is byte-identical, except the two package `__init__.py` files (see below).

usage: python prepare.py WHEEL_OR_EXTRACTED_DIR
"""
import json
import os
import shutil
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "numba_cuda/numba/cuda/tests/"

RULES = [
    ("numba_cuda.numba.cuda", "zymo.cuda"),
    ("numba.cuda", "zymo.cuda"),
    ("from numba import cuda", "from zymo import cuda"),
]

# The upstream package __init__.py files only do `from numba.cuda.tests import load_testsuite`
# (a unittest loader hook).  pytest does not use it; keeping it would make every test in the
# folder an import error about a harness helper rather than about kernels.  The renamed original
# is kept next to it as __init__.py.upstream and its import is measured on its own (run.py).
HARNESS_INIT = ("# Written by the measurement harness (not upstream): an empty package marker.\n"
                "# The upstream file (renamed) is __init__.py.upstream.\n")


def rename(text: str) -> str:
    for old, new in RULES:
        text = text.replace(old, new)
    return text


def main():
    src = sys.argv[1]
    files = {}
    if src.endswith(".whl"):
        with zipfile.ZipFile(src) as z:
            for n in z.namelist():
                if n.startswith(PREFIX) and not n.endswith("/"):
                    files[n[len(PREFIX):]] = z.read(n)
    else:
        for root, _, names in os.walk(src):
            for n in names:
                p = os.path.join(root, n)
                files[os.path.relpath(p, src)] = open(p, "rb").read()
    manifest = {"source": os.path.basename(src), "rules": RULES, "files": {}}
    for sub in ("doc_examples", "cudapy", "data"):
        shutil.rmtree(os.path.join(HERE, sub), ignore_errors=True)
    for rel, data in sorted(files.items()):
        top = rel.split("/")[0]
        if top not in ("doc_examples", "cudapy", "data"):
            continue
        if "__pycache__" in rel:
            continue
        out = os.path.join(HERE, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        changed = 0
        if rel.endswith((".py", ".cu", ".cuh", ".ptx", ".txt", ".h")):
            text = data.decode("utf-8")
            changed = 0
            for old, new in RULES:
                changed += text.count(old)
                text = text.replace(old, new)
            data = text.encode("utf-8")
        if rel in ("cudapy/__init__.py", "doc_examples/__init__.py"):
            with open(out + ".upstream", "wb") as f:
                f.write(data)
            data = HARNESS_INIT.encode()
        with open(out, "wb") as f:
            f.write(data)
        manifest["files"][rel] = {"bytes": len(data), "renames": changed}
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"wrote {len(manifest['files'])} files")


if __name__ == "__main__":
    main()
