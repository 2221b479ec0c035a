"""Measurement harness plugin (not upstream).

1. Records every test outcome, with the exception's type, first message line and the innermost
   zymo frame, as JSON lines into $NUMBA_REF_RECORD (run.py reads them).
2. Unless NUMBA_REF_NO_SHIM=1: makes `zymo.cuda.tests.cudapy`, `zymo.cuda.tests.doc_examples`
   and `zymo.cuda.tests.data` resolve to the copies in this folder, as if the upstream test tree
   sat inside the package the rename points at (the tests import their helper modules, e.g.
   `numba.cuda.tests.cudapy.complex_usecases`, by absolute name).  Nothing in the zymo checkout is
   touched: only the imported package's __path__ is extended in this process.
"""
import json
import os
import re
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
_RECORD = os.environ.get("NUMBA_REF_RECORD")
_SHIM = os.environ.get("NUMBA_REF_NO_SHIM") != "1"
_shim_state = "off"

if _SHIM:
    try:
        import zymo.cuda.tests as _zt
        if HERE not in _zt.__path__:
            _zt.__path__.append(HERE)
        _shim_state = "on"
    except Exception as e:  # noqa: BLE001  (recorded, not fatal)
        _shim_state = f"failed: {type(e).__name__}: {e}"


def _write(rec):
    if not _RECORD:
        return
    with open(_RECORD, "a") as f:
        f.write(json.dumps(rec) + "\n")


def _first_line(s):
    s = str(s).strip()
    return s.splitlines()[0] if s else ""


def _is_test_file(fn):
    """A file of the upstream copies here (not the zymo snapshot under _zymo/)."""
    return fn.startswith(HERE + "/") and not fn.startswith(os.path.join(HERE, "_zymo") + "/")


def _zymo_frame(tb):
    """The innermost frame inside zymo (file relative to the zymo package, line, function)."""
    where = None
    for fr in traceback.extract_tb(tb):
        fn = fr.filename.replace("\\", "/")
        i = fn.rfind("/zymo/")
        if i >= 0 and not _is_test_file(fn):
            where = f"{fn[i + 1:]}:{fr.lineno} {fr.name}"
    return where


def _test_frame(tb):
    """The innermost frame inside the upstream test files."""
    where = None
    for fr in traceback.extract_tb(tb):
        fn = fr.filename.replace("\\", "/")
        if _is_test_file(fn) and not fn.endswith("conftest.py"):
            where = f"{os.path.relpath(fr.filename, HERE)}:{fr.lineno}"
    return where


def _exc_info(excinfo):
    if excinfo is None:
        return {}
    v = excinfo.value
    t = excinfo.type
    name = t.__name__
    mod = getattr(t, "__module__", "")
    if mod and mod not in ("builtins",):
        qual = f"{mod}.{name}"
    else:
        qual = name
    msg = _first_line(v)
    full = str(v)
    if re.match(r"^\d+ errors?$", msg):
        # zymo's CompileError lists its diagnostics on the lines after "N errors"
        nxt = [ln.strip() for ln in full.splitlines()[1:] if "error:" in ln]
        if nxt:
            msg = f"{nxt[0]}  [first of {msg}]"
    err = getattr(v, "stderr", None)
    if name == "CalledProcessError" and err:
        # a test that runs a snippet in a subprocess: the snippet's own error is what matters
        if isinstance(err, bytes):
            err = err.decode("utf-8", "replace")
        lines = [ln.strip() for ln in err.strip().splitlines() if ln.strip()]
        excs = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Exit|Interrupt)\b", ln)]
        msg = f"(subprocess) {excs[-1] if excs else (lines[-1] if lines else msg)}"
    return {"exc_type": name, "exc_qualname": qual, "exc_msg": msg[:500],
            "zymo_frame": _zymo_frame(excinfo.tb), "test_frame": _test_frame(excinfo.tb)}


def pytest_configure(config):
    _write({"kind": "session", "shim": _shim_state})


def pytest_runtest_makereport(item, call):
    # runs before pytest builds the report: record the raw exception
    if call.excinfo is not None and not call.excinfo.errisinstance(
            __import__("_pytest.outcomes", fromlist=["Skipped"]).Skipped):
        _write({"kind": "exc", "nodeid": item.nodeid, "when": call.when,
                **_exc_info(call.excinfo)})


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        rec = {"kind": "test", "nodeid": report.nodeid, "when": report.when,
               "outcome": report.outcome, "duration": round(report.duration, 3)}
        if hasattr(report, "wasxfail"):
            rec["xfail"] = report.wasxfail or True
        if report.outcome == "skipped":
            lr = report.longrepr
            if isinstance(lr, tuple) and len(lr) == 3:
                rec["skip_reason"] = str(lr[2])[:300]
            else:
                rec["skip_reason"] = _first_line(lr)[:300]
        elif report.outcome == "failed":
            crash = getattr(report.longrepr, "reprcrash", None)
            text = crash.message if crash else report.longrepr
            rec["crash"] = _first_line(text)[:500]
        _write(rec)


def pytest_collectreport(report):
    if report.outcome == "failed":
        lr = report.longrepr
        crash = getattr(lr, "reprcrash", None)
        msg = crash.message if crash else str(lr)
        # "ImportError while importing test module ..." strings: take the last `E   ` block
        lines = [ln[1:].strip() for ln in str(lr).splitlines() if ln.startswith("E ")]
        if crash is None and lines:
            # first line of the final exception
            last = [i for i, ln in enumerate(lines) if ln and not ln.startswith(" ")]
            msg = lines[last[-1]] if last else lines[-1]
            for ln in lines:
                if ln.split(":")[0].endswith(("Error", "Exception")):
                    msg = ln
        _write({"kind": "collect_error", "nodeid": report.nodeid,
                "crash": _first_line(msg)[:500], "detail": "\n".join(lines[-12:])[:3000]})
    elif report.outcome == "skipped":
        lr = report.longrepr
        reason = str(lr[2]) if isinstance(lr, tuple) and len(lr) == 3 else _first_line(lr)
        _write({"kind": "collect_skip", "nodeid": report.nodeid, "skip_reason": reason[:300]})
