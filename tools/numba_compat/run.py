#!/usr/bin/env python
"""Run numba-cuda's doc examples and cudapy kernel tests (renamed to zymo.cuda) one file at a
time under pytest, and write results.md / results.json.  Measurement only.

usage:
  python run.py                       # doc examples + cudapy kernel-semantics files
  python run.py --only doc            # or --only cudapy
  python run.py --files cudapy/test_atomics.py doc_examples/test_vecadd.py
  python run.py --include-internals   # also the cudapy files that inspect numba internals
  python run.py --timeout 120 --zymo ../.. --no-shim --out results

Each file: `python -m pytest -q -p no:cacheprovider --tb=line -rA FILE` in this folder with
PYTHONPATH=<zymo checkout>, a per-file timeout (a file past it is killed and noted; the tests it
finished are kept).  conftest.py records each outcome and exception as JSON lines.
"""
import argparse
import ast
import collections
import datetime
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# cudapy files left out of the kernel-semantics count: they inspect numba's internals (IR,
# typing, passes, caching, debug info, dispatcher/compiler objects, extension API, pickling,
# tracing), need several processes/devices, or test bfloat16/fp8 bindings.
INTERNALS = {
    "test_analysis", "test_byteflow", "test_caching", "test_compiler", "test_copy_propagate",
    "test_datamodel", "test_debug", "test_debuginfo", "test_debuginfo_types", "test_dispatcher",
    "test_extending", "test_extending_types", "test_inspect", "test_ipc", "test_ir",
    "test_ir_utils", "test_lineinfo", "test_multiprocessing", "test_nondet", "test_typeconv",
    "test_typeinfer", "test_ssa", "test_optimization", "test_tracing", "test_serialize",
    "test_launch_config_sensitive", "test_make_function_to_jit_function", "test_numba_interop",
    "test_bfloat16", "test_bfloat16_bindings", "test_fp8", "test_fp8_bindings",
    "test_cupy_bfloat16_interop", "test_fp8_e4m3_int8_debug", "test_overload",
}

STDLIB = set(getattr(sys, "stdlib_module_names", ()))


def discover(only, include_internals):
    files = []
    if only in (None, "doc"):
        files += sorted(glob.glob(os.path.join(HERE, "doc_examples", "test_*.py")))
    if only in (None, "cudapy"):
        for f in sorted(glob.glob(os.path.join(HERE, "cudapy", "test_*.py"))):
            stem = os.path.basename(f)[:-3]
            if stem in INTERNALS and not include_internals:
                continue
            files.append(f)
    return [os.path.relpath(f, HERE) for f in files]


def suite_of(rel):
    if rel.startswith("doc_examples/"):
        return "doc"
    stem = os.path.basename(rel)[:-3]
    return "cudapy-internals" if stem in INTERNALS else "cudapy"


# ---------------------------------------------------------------- static facts about a file

def static_tests(path):
    """Test functions/methods defined in the file (a denominator for files that fail to
    import): module-level `test*` functions and `test*` methods of classes named Test*/…TestCase
    or deriving from a TestCase.  Inherited tests are not counted."""
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except SyntaxError:
        return []
    out = []
    for node in tree.body:
        functions = (ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, functions) and node.name.startswith("test"):
            out.append(node.name)
        elif isinstance(node, ast.ClassDef):
            bases = [ast.unparse(b) for b in node.bases]
            if node.name.startswith("Test") or any("TestCase" in b for b in bases):
                for sub in node.body:
                    if isinstance(sub, functions) and sub.name.startswith("test"):
                        out.append(f"{node.name}::{sub.name}")
    return out


def static_imports(path):
    """Every import statement (any depth) of a non-stdlib module, one entry per imported name."""
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except SyntaxError:
        return []
    pkg = os.path.dirname(os.path.relpath(path, HERE)).replace(os.sep, ".")
    deferred = set()   # nodes inside function bodies: they do not run at import time
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for sub in ast.walk(fn):
                if sub is not fn:
                    deferred.add(id(sub))
    guarded = set()    # nodes under a module-level `if`/`try` (e.g. `if HAS_NUMBA:`)
    for g in ast.walk(tree):
        if isinstance(g, (ast.If, ast.Try)) and id(g) not in deferred:
            for sub in ast.walk(g):
                if sub is not g:
                    guarded.add(id(sub))
    out = []
    for node in ast.walk(tree):
        top_level = id(node) not in deferred and id(node) not in guarded
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                if top not in STDLIB and top not in ("numpy", "pytest"):
                    out.append({"stmt": f"import {a.name}", "module": a.name, "name": None,
                                "line": node.lineno, "top_level": top_level})
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(base + ([node.module] if node.module else []))
                shown = "." * node.level + (node.module or "")
            else:
                mod, shown = node.module, node.module
                top = mod.split(".")[0]
                if top in STDLIB or top in ("numpy", "pytest"):
                    continue
            for a in node.names:
                out.append({"stmt": f"from {shown} import {a.name}", "module": mod,
                            "name": a.name, "line": node.lineno, "top_level": top_level})
    return out


PROBE = r'''
import importlib, json, sys
sys.path.insert(0, HERE)
if SHIM:
    try:
        import zymo.cuda.tests as zt
        zt.__path__.append(HERE)
    except Exception:
        pass
res = {}
for key, (mod, name) in ITEMS.items():
    try:
        m = importlib.import_module(mod)
        if name is not None and name != "*" and not hasattr(m, name):
            try:
                importlib.import_module(mod + "." + name)
            except ModuleNotFoundError:
                raise ImportError(f"cannot import name {name!r} from {mod!r}")
        res[key] = None
    except BaseException as e:
        res[key] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
print(json.dumps(res))
'''


def probe_imports(files, env, shim):
    items, per_file = {}, {}
    for rel in files:
        imps = static_imports(os.path.join(HERE, rel))
        per_file[rel] = imps
        for im in imps:
            items[f"{im['module']}|{im['name']}"] = (im["module"], im["name"])
    code = (PROBE.replace("HERE", repr(HERE)).replace("SHIM", repr(shim))
            .replace("ITEMS", repr(items)))
    try:
        p = subprocess.run([sys.executable, "-c", code], env=env, cwd=HERE, capture_output=True,
                           text=True, timeout=300)
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except Exception as e:  # noqa: BLE001
        return {"error": f"import probe failed: {e}"}, per_file
    return res, per_file


# ---------------------------------------------------------------- running

def run_file(rel, env, timeout, logdir):
    rec = os.path.join(logdir, rel.replace("/", "__") + ".jsonl")
    log = os.path.join(logdir, rel.replace("/", "__") + ".log")
    if os.path.exists(rec):
        os.remove(rec)
    env = dict(env, NUMBA_REF_RECORD=rec)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=line", "-rA",
           rel]
    t0 = time.time()
    timed_out = False
    with open(log, "w") as lf:
        p = subprocess.Popen(cmd, cwd=HERE, env=env, stdout=lf, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(p.pid, signal.SIGKILL)   # the process group this call started
            rc = p.wait()
    wall = time.time() - t0
    records = []
    if os.path.exists(rec):
        with open(rec) as f:
            for line in f:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return {"file": rel, "rc": rc, "wall_s": round(wall, 1), "timed_out": timed_out,
            "records": records, "log": os.path.relpath(log, HERE)}


def summarize_file(res, static):
    """Per-test outcomes of one file (one entry per test nodeid)."""
    tests = collections.OrderedDict()
    excs = {}
    collect_errors, collect_skips = [], []
    for r in res["records"]:
        k = r.get("kind")
        if k == "exc":
            excs.setdefault(r["nodeid"], {})[r["when"]] = r
        elif k == "collect_error":
            collect_errors.append(r)
        elif k == "collect_skip":
            collect_skips.append(r)
        elif k == "test":
            tests.setdefault(r["nodeid"], []).append(r)
    out = []
    for nodeid, reps in tests.items():
        phases = {r["when"]: r for r in reps}
        outcome, cause, detail = None, None, None
        setup, call, teardown = phases.get("setup"), phases.get("call"), phases.get("teardown")
        if setup and setup["outcome"] == "failed":
            outcome, ph = "error", "setup"
        elif setup and setup["outcome"] == "skipped":
            outcome = "xfailed" if setup.get("xfail") else "skipped"
            detail = setup.get("skip_reason")
        elif call and call["outcome"] == "failed":
            outcome, ph = "failed", "call"
        elif call and call["outcome"] == "skipped":
            outcome = "xfailed" if call.get("xfail") else "skipped"
            detail = call.get("skip_reason") or str(call.get("xfail"))
        elif teardown and teardown["outcome"] == "failed":
            outcome, ph = "error", "teardown"
        elif call and call["outcome"] == "passed":
            outcome = "xpassed" if call.get("xfail") else "passed"
        else:
            outcome = "error"
            ph = "?"
        if outcome in ("failed", "error"):
            e = excs.get(nodeid, {}).get(ph)
            rep = phases.get(ph, {})
            if e and e.get("exc_type"):
                cause = f"{e['exc_type']}: {e['exc_msg']}" if e["exc_msg"] else e["exc_type"]
                detail = {"zymo_frame": e.get("zymo_frame"), "test_frame": e.get("test_frame"),
                          "exc_qualname": e.get("exc_qualname")}
            else:
                cause = rep.get("crash") or "unknown"
        out.append({"nodeid": nodeid, "outcome": outcome, "cause": cause, "detail": detail})
    n_static = len(static)
    if collect_errors:
        # the module did not import: every test it defines is an error of that cause
        ce = collect_errors[0]
        n = max(n_static, 1)
        for i in range(n):
            name = static[i] if i < n_static else "<module>"
            out.append({"nodeid": f"{res['file']}::{name}", "outcome": "error",
                        "cause": ce["crash"], "detail": {"collect_error": True},
                        "static": True})
    elif collect_skips and not tests:
        for i in range(max(n_static, 1)):
            name = static[i] if i < n_static else "<module>"
            out.append({"nodeid": f"{res['file']}::{name}", "outcome": "skipped",
                        "cause": None, "detail": collect_skips[0]["skip_reason"],
                        "static": True})
    if res["timed_out"]:
        ran = {o["nodeid"].split("::", 1)[-1].replace("::", "::") for o in out}
        missing = [s for s in static if not any(x.endswith(s) for x in ran)]
        for s in missing:
            out.append({"nodeid": f"{res['file']}::{s}", "outcome": "not_run",
                        "cause": f"file timed out after {res['wall_s']} s", "detail": None,
                        "static": True})
    return out


# ---------------------------------------------------------------- grouping causes

_PATH = re.compile(r"\s*\((/|[A-Za-z]:\\)[^)]*\)")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_NUM = re.compile(r"(?<![\w'\"])[-+]?\d+(\.\d+)?([eE][-+]?\d+)?(?![\w'\"])")


def cause_key(cause):
    """A grouping key: paths, addresses and numbers taken out; import and attribute errors
    keep the missing name (that is what the next work is)."""
    if not cause:
        return "unknown"
    c = _PATH.sub("", cause.strip())
    c = _HEX.sub("0x…", c)
    # zymo diagnostics start with `file:line:col: error: `; the place is not the cause
    c = re.sub(r"(?<![\w])(<[^>]+>|[^\s:]+\.py|<string>):\d+:\d+: ", "", c)
    m = re.match(r"(ModuleNotFoundError): No module named '([^']+)'", c)
    if m:
        return f"ModuleNotFoundError: No module named '{m.group(2)}'"
    m = re.match(r"ImportError: cannot import name '([^']+)' from '([^']+)'", c)
    if m:
        return f"ImportError: cannot import name '{m.group(1)}' from '{m.group(2)}'"
    m = re.match(r"AttributeError: (module '[^']+'|'[^']+' object|type object '[^']+') "
                 r"has no attribute '([^']+)'", c)
    if m:
        return f"AttributeError: {m.group(1)} has no attribute '{m.group(2)}'"
    if c.startswith("AssertionError: unexpectedly None"):
        return "AssertionError: unexpectedly None (a regex/IR search found nothing)"
    if c.startswith("AssertionError"):
        # value mismatches differ in their numbers only
        c = _NUM.sub("N", c)
        if "Arrays are not" in c or "Not equal to tolerance" in c or "Mismatched elements" in c:
            return "AssertionError: arrays differ (numpy.testing)"
        return c[:160]
    c = re.sub(r"\s+\[first of \d+ errors\]$", "", c)
    c = _NUM.sub("N", c)
    return c[:200]


def _missing_name(key):
    """The missing name in an import/attribute key (the first quoted word)."""
    m = re.search(r"'([^']+)'", key)
    return m.group(1) if m else key


def cause_family(key):
    """A coarser family for the missing-name keys: the module or object that lacks names."""
    m = re.match(r"ImportError: cannot import name '[^']+' from '([^']+)'", key)
    if m:
        return f"ImportError: cannot import names from '{m.group(1)}'"
    m = re.match(r"AttributeError: (.+) has no attribute", key)
    if m:
        return f"AttributeError: {m.group(1)} lacks attributes"
    m = re.match(r"ModuleNotFoundError: No module named '([^'.]+)", key)
    if m:
        return f"ModuleNotFoundError: '{m.group(1)}…'"
    return key


# ---------------------------------------------------------------- report

def counts(tests):
    c = collections.Counter(t["outcome"] for t in tests)
    return {k: c.get(k, 0) for k in
            ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "not_run")}


def pct(a, b):
    return f"{100.0 * a / b:.1f}%" if b else "n/a"


def write_report(all_res, probe, per_file_imports, args, started, out):
    suites = collections.OrderedDict((s, []) for s in ("doc", "cudapy", "cudapy-internals"))
    for r in all_res:
        suites[suite_of(r["file"])].append(r)
    j = {"started": started, "finished": datetime.datetime.now().isoformat(timespec="seconds"),
         "zymo": args.zymo, "zymo_commit": args.commit, "shim": not args.no_shim,
         "timeout_s": args.timeout, "source": source_note(), "suites": {}, "files": [],
         "import_probe": {}}
    md = []
    md.append("# numba-cuda tests against zymo.cuda (renamed): results\n")
    md.append(f"- run: {j['started']} .. {j['finished']}, zymo at `{args.zymo}` "
              f"(commit {j['zymo_commit']}), CPU backend unless a GPU is present")
    md.append(f"- source: {j['source']}")
    md.append(f"- per-file timeout {args.timeout} s; helper-module shim "
              f"{'on' if j['shim'] else 'off'} (see conftest.py)")
    md.append("- counting: one entry per test; a file that fails to import counts every test "
              "it defines (static count) as an error of that cause; a timed-out file counts the "
              "tests it did not reach as not_run\n")

    md.append("## Totals\n")
    md.append("| suite | files | tests | passed | failed | error | skipped | xfailed | xpassed "
              "| not_run | pass rate (of tests) | pass rate (excl. skipped) |")
    md.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s, rs in suites.items():
        if not rs:
            continue
        tests = [t for r in rs for t in r["tests"]]
        c = counts(tests)
        n = len(tests)
        md.append(f"| {s} | {len(rs)} | {n} | " + " | ".join(str(c[k]) for k in c) +
                  f" | {pct(c['passed'], n)} | {pct(c['passed'], n - c['skipped'])} |")
        j["suites"][s] = {"files": len(rs), "tests": n, **c}
    if suites["doc"]:
        full = [r["file"] for r in suites["doc"]
                if r["tests"] and all(t["outcome"] == "passed" for t in r["tests"])]
        md.append(f"\nDoc example files passing completely: **{len(full)} of "
                  f"{len(suites['doc'])}** ({', '.join(os.path.basename(f) for f in full)})")
        j["suites"]["doc"]["files_fully_passing"] = full
    md.append("")

    md.append("## Per file\n")
    md.append("| file | suite | tests | passed | failed | error | skipped | other | wall s "
              "| note |")
    md.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in all_res:
        c = counts(r["tests"])
        other = c["xfailed"] + c["xpassed"] + c["not_run"]
        note = []
        if r["timed_out"]:
            note.append(f"TIMEOUT (> {args.timeout} s)")
        if r["collect_error"]:
            note.append("import: " + cause_key(r["collect_error"])[:90])
        md.append(f"| {r['file']} | {suite_of(r['file'])} | {len(r['tests'])} | {c['passed']} | "
                  f"{c['failed']} | {c['error']} | {c['skipped']} | {other} | {r['wall_s']} | "
                  f"{'; '.join(note)} |")
        j["files"].append({"file": r["file"], "suite": suite_of(r["file"]), "rc": r["rc"],
                           "wall_s": r["wall_s"], "timed_out": r["timed_out"],
                           "collect_error": r["collect_error"], "counts": c,
                           "static_tests": r["static_count"], "log": r["log"],
                           "tests": r["tests"]})
    md.append("")

    for label, ss, runtime_only in (
            ("doc examples + cudapy kernel tests", ("doc", "cudapy"), False),
            ("inside tests that ran (doc + cudapy kernel files that imported)",
             ("doc", "cudapy"), True),
            ("doc examples", ("doc",), False), ("cudapy kernel tests", ("cudapy",), False),
            ("cudapy internals (not in the kernel count)", ("cudapy-internals",), False)):
        rs = [r for s in ss for r in suites[s]]
        bad = [(r["file"], t) for r in rs for t in r["tests"]
               if t["outcome"] in ("failed", "error", "not_run")
               and not (runtime_only and r["collect_error"])]
        if not bad:
            continue
        top = 25 if len(ss) == 2 else 15
        if runtime_only:
            top = 40
        groups = collections.defaultdict(lambda: {"tests": 0, "files": set(), "example": None,
                                                   "zymo_frames": collections.Counter()})
        for f, t in bad:
            g = groups[cause_key(t["cause"])]
            g["tests"] += 1
            g["files"].add(os.path.basename(f))
            g["example"] = g["example"] or t["cause"]
            d = t.get("detail")
            if isinstance(d, dict) and d.get("zymo_frame"):
                g["zymo_frames"][d["zymo_frame"]] += 1
        ranked = sorted(groups.items(), key=lambda kv: (-kv[1]["tests"], -len(kv[1]["files"])))
        md.append(f"## Top {top} failure causes: {label}\n")
        md.append(f"{len(bad)} failing/erroring/not-run tests, {len(groups)} distinct causes.\n")
        md.append("| # | tests | files | cause (first line, numbers/paths normalised) | "
                  "raised in zymo at (most frequent) | files (up to 6) |")
        md.append("|---|---|---|---|---|---|")
        for i, (k, g) in enumerate(ranked[:top], 1):
            zf = g["zymo_frames"].most_common(1)
            zf = f"`{zf[0][0]}`" if zf else ""
            fl = ", ".join(sorted(g["files"])[:6]) + (" …" if len(g["files"]) > 6 else "")
            md.append(f"| {i} | {g['tests']} | {len(g['files'])} | `{k.replace('|', '/')}` | "
                      f"{zf} | {fl} |")
        fam = collections.defaultdict(lambda: [0, set(), collections.Counter()])
        for k, g in groups.items():
            fk = cause_family(k)
            fam[fk][0] += g["tests"]
            fam[fk][1] |= g["files"]
            fam[fk][2][k] += g["tests"]
        fam_multi = [(k, v) for k, v in fam.items() if len(v[2]) > 1]
        if fam_multi:
            md.append("\nMissing names, aggregated (module/object → names, tests affected):\n")
            for k, v in sorted(fam_multi, key=lambda kv: -kv[1][0]):
                names = ", ".join(f"{_missing_name(n)} ({c})" for n, c in v[2].most_common())
                md.append(f"- **{k}** — {v[0]} tests, {len(v[1])} files: {names}")
        md.append("")
        j.setdefault("causes", {})[label] = [
            {"key": k, "tests": g["tests"], "files": sorted(g["files"]), "example": g["example"],
             "zymo_frames": g["zymo_frames"].most_common(5)} for k, g in ranked]

    # imports that fail, statically probed (each import statement on its own)
    if probe:
        md.append("## Imports that fail (each import statement of the files tried on its own)\n")
        if "error" in probe:
            md.append(probe["error"])
        else:
            fails = collections.defaultdict(lambda: {"files": set(), "err": None, "stmt": None})
            for f, imps in per_file_imports.items():
                for im in imps:
                    key = f"{im['module']}|{im['name']}"
                    err = probe.get(key)
                    if err:
                        e = fails[im["stmt"]]
                        e["files"].add(os.path.basename(f))
                        e["err"] = err
            # files that do not import: every failing module-level import is a blocker
            blockers = collections.defaultdict(lambda: {"files": [], "tests": 0, "sole_files": [],
                                                        "sole_tests": 0, "err": None})
            blocked_files = {}
            for r in all_res:
                if not r["collect_error"] or suite_of(r["file"]) == "cudapy-internals":
                    continue
                bl = []
                for im in per_file_imports.get(r["file"], []):
                    err = probe.get(f"{im['module']}|{im['name']}")
                    if err and im["top_level"] and im["stmt"] not in bl:
                        bl.append(im["stmt"])
                        blockers[im["stmt"]]["err"] = err
                blocked_files[r["file"]] = bl
                for stmt in bl:
                    b = blockers[stmt]
                    b["files"].append(os.path.basename(r["file"]))
                    b["tests"] += r["static_count"]
                    if len(bl) == 1:
                        b["sole_files"].append(os.path.basename(r["file"]))
                        b["sole_tests"] += r["static_count"]
            j["import_blockers"] = {"per_file": blocked_files,
                                    "per_import": {k: v for k, v in blockers.items()}}
            if blockers:
                md.append("### What keeps files from importing\n")
                md.append("Each failing module-level import of the files that do not import "
                          "(tried on its own; imports under a module-level `if`/`try` are not "
                          "counted). "
                          "`tests` = tests in the files it blocks; `alone` = "
                          "files/tests it alone blocks (adding just this name unblocks them).\n")
                md.append("Doc example and cudapy kernel files only. `cumulative` = tests in "
                          "files whose blockers are all provided once this row and every row "
                          "above it are.\n")
                md.append("| import | files | tests | alone: files | alone: tests | "
                          "cumulative: files / tests | error |")
                md.append("|---|---|---|---|---|---|---|")
                added = set()
                static_of = {r["file"]: r["static_count"] for r in all_res}
                for stmt, b in sorted(blockers.items(), key=lambda kv: (-kv[1]["tests"], kv[0])):
                    added.add(stmt)
                    free = [f for f, bl in blocked_files.items() if bl and set(bl) <= added]
                    b["cumulative"] = [len(free), sum(static_of[f] for f in free)]
                    md.append(f"| `{stmt}` | {len(b['files'])} | {b['tests']} | "
                              f"{len(b['sole_files'])} | {b['sole_tests']} | "
                              f"{len(free)} / {sum(static_of[f] for f in free)} | "
                              f"{_PATH.sub('', b['err'])[:100]} |")
                md.append("\nPer file (blocking imports):\n")
                for f, bl in blocked_files.items():
                    md.append(f"- {f} ({next(r['static_count'] for r in all_res if r['file'] == f)}"
                              f" tests): " + ("; ".join(f"`{x}`" for x in bl) or
                                              "no failing import found by the probe (see log)"))
                md.append("\n### Every failing import statement (module level or inside tests)\n")
            md.append("| import | files | error |")
            md.append("|---|---|---|")
            for stmt, e in sorted(fails.items(), key=lambda kv: (-len(kv[1]["files"]), kv[0])):
                fl = ", ".join(sorted(e["files"])[:5]) + (" …" if len(e["files"]) > 5 else "")
                md.append(f"| `{stmt}` | {len(e['files'])} ({fl}) | "
                          f"{_PATH.sub('', e['err'])[:120]} |")
                j["import_probe"][stmt] = {"files": sorted(e["files"]), "error": e["err"]}
        md.append("")
    skipped = collections.Counter()
    for r in all_res:
        for t in r["tests"]:
            if t["outcome"] == "skipped":
                skipped[str(t.get("detail"))[:150]] += 1
    if skipped:
        md.append("## Skip reasons\n")
        for k, v in skipped.most_common(20):
            md.append(f"- {v} × {k}")
        md.append("")
    with open(out + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    with open(out + ".json", "w") as f:
        json.dump(j, f, indent=1)


def snapshot(repo, ref):
    """Export REF's zymo/ package (git archive: reads the repository, writes nothing there)."""
    sha = subprocess.run(["git", "-C", repo, "rev-parse", "--short=10", ref], check=True,
                         capture_output=True, text=True).stdout.strip()
    dest = os.path.join(HERE, "_zymo", sha)
    if not os.path.isdir(os.path.join(dest, "zymo")):
        os.makedirs(dest, exist_ok=True)
        arch = subprocess.run(["git", "-C", repo, "archive", "--format=tar", sha, "zymo"],
                              check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", dest], input=arch, check=True)
    return dest, sha


def git_head(path):
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip() or "?"
    except Exception:  # noqa: BLE001
        return "?"


def source_note():
    try:
        m = json.load(open(os.path.join(HERE, "manifest.json")))
        return f"{m['source']} (renamed: {'; '.join(a + ' -> ' + b for a, b in m['rules'])})"
    except Exception:  # noqa: BLE001
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["doc", "cudapy"])
    ap.add_argument("--files", nargs="+", help="paths relative to this folder (or basenames)")
    ap.add_argument("--include-internals", action="store_true")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--jobs", type=int, default=1, help="files run at once")
    ap.add_argument("--zymo", default=os.path.dirname(os.path.dirname(HERE)),
                    help="zymo git checkout to measure (default: this repository)")
    ap.add_argument("--ref", default="HEAD",
                    help="commit of --zymo to measure: its zymo/ is exported (git archive, "
                         "read-only for the repository) to _zymo/<sha>/ so that edits made to "
                         "the working tree during the run do not leak in (default HEAD)")
    ap.add_argument("--live", action="store_true",
                    help="import zymo from the --zymo working tree as it is (no snapshot)")
    ap.add_argument("--no-shim", action="store_true",
                    help="do not map zymo.cuda.tests.{cudapy,doc_examples} to this folder")
    ap.add_argument("--no-probe", action="store_true", help="skip the static import probe")
    ap.add_argument("--out", default=os.path.join(HERE, "results"),
                    help="output path without extension (.md and .json are written)")
    args = ap.parse_args()

    if args.files:
        files = []
        for f in args.files:
            f = os.path.relpath(os.path.abspath(f), HERE) if os.path.exists(f) else f
            if not os.path.exists(os.path.join(HERE, f)):
                hits = glob.glob(os.path.join(HERE, "*", os.path.basename(f)))
                if not hits:
                    sys.exit(f"no such test file: {f}")
                f = os.path.relpath(hits[0], HERE)
            files.append(f)
    else:
        files = discover(args.only, args.include_internals)
    if args.live:
        zpath, args.commit = args.zymo, git_head(args.zymo) + " (live working tree)"
    else:
        zpath, args.commit = snapshot(args.zymo, args.ref)
    print(f"zymo from {zpath} ({args.commit})", flush=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = zpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if args.no_shim:
        env["NUMBA_REF_NO_SHIM"] = "1"
    logdir = os.path.join(HERE, "logs")
    os.makedirs(logdir, exist_ok=True)
    started = datetime.datetime.now().isoformat(timespec="seconds")
    all_res = []

    def one(rel):
        return rel, run_file(rel, env, args.timeout, logdir)

    # files run in parallel processes with --jobs N (results reported in file order)
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        ran = list(pool.map(one, files))
    for i, (rel, res) in enumerate(ran, 1):
        static = static_tests(os.path.join(HERE, rel))
        res["static_count"] = len(static)
        ce = [r for r in res["records"] if r.get("kind") == "collect_error"]
        res["collect_error"] = ce[0]["crash"] if ce else None
        res["tests"] = summarize_file(res, static)
        del res["records"]
        c = counts(res["tests"])
        print(f"[{i}/{len(files)}] {rel}: {c['passed']} passed, {c['failed']} failed, "
              f"{c['error']} error, {c['skipped']} skipped"
              f"{', TIMEOUT' if res['timed_out'] else ''} ({res['wall_s']} s)", flush=True)
        all_res.append(res)
    probe, per_file = ({}, {}) if args.no_probe else probe_imports(files, env, not args.no_shim)
    write_report(all_res, probe, per_file, args, started, args.out)
    print(f"wrote {args.out}.md and {args.out}.json")


if __name__ == "__main__":
    main()
